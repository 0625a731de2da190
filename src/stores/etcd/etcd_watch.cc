// stores/etcd/etcd_watch.cc — the etcd:// store's change feed
// (Store::watch): one etcd Watch on the key range of the locks under a
// prefix (docs/stores/etcd.md, "Change feed").
//
// Every change of a lock is a write of a key under "<prefix>/l/<escaped
// name>/": a request queued or granted at once (a put), a grant of a waiter
// (a put), a release or withdrawal (a delete), an extend that changes the
// lease's length (a put moving the key to a new lease), and an expiry (etcd
// deletes the keys of a lease that ran out: a delete). So one watch on the
// range "<prefix>/l/<escaped prefix>" sees every change list() can show but
// one: an extend that keeps the lease's length is a lease keep-alive, which
// no watch reports (the holder's time left grows; nothing else changes).
//
// The feed's stream is read by a thread of its own, which counts the
// responses that carry events; wait_change() returns once the count moved
// since its previous return. The stream stays open across waits, so a
// change made while nobody waits is counted and never lost. A stream that
// breaks (its member gone or without a leader) wakes the waiter at once;
// the thread then opens a new one on the next member and wakes the waiter
// again once it is open, so a change made while no stream was open is
// read by the caller's list() after that second wake.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "stores/etcd/etcd_impl.h"

namespace baton::store::etcd {

using std::chrono::steady_clock;

namespace {

// A stream is opened for this long and then opened anew (gRPC needs a
// deadline; the reopen costs one spurious wake).
constexpr auto kStreamLife = std::chrono::hours(1);
// Pause before opening a new stream after one broke: doubles from the
// first to the last while opens keep failing.
constexpr milliseconds kRetryFirst{50};
constexpr milliseconds kRetryLast{2000};

}  // namespace

class EtcdFeed final : public Waitable {
 public:
  EtcdFeed(Conn& conn, std::string key, std::string range_end)
      : conn_(conn), key_(std::move(key)), range_end_(std::move(range_end)) {}
  ~EtcdFeed() override;

  // Starts the thread and waits until its first stream is open, every
  // member refused or failed it once, or ctx's deadline (or the request
  // timeout) passed.
  Status arm(const CallContext& ctx);
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override;

 private:
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<
        grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>>
        rw;
  };
  // Opens a stream on `endpoint` and waits for etcd's confirmation of the
  // watch. OK: *out is open. Otherwise why not (the stream is closed).
  grpc::Status open(std::size_t endpoint, std::unique_ptr<Stream>* out);
  // One try of open() with `token` (empty: none).
  grpc::Status open_once(std::size_t endpoint, const std::string& token,
                         std::unique_ptr<Stream>* out);
  // Reads *s until it ends (break, deadline, cancel); true if it was
  // cancelled by the destructor.
  bool drain(Stream& s);
  void run();
  void bump();  // a change (or a break, or a reopen): wake the waiter

  Conn& conn_;
  const std::string key_, range_end_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t changes_ = 0;  // guarded by mu_
  std::uint64_t seen_ = 0;     // wait_change()'s thread only
  bool stopping_ = false;      // guarded by mu_
  Stream* live_ = nullptr;     // the stream being read; guarded by mu_
  // arm(): 0 opening, 1 open, 2 failed (with first_error_).
  int armed_ = 0;             // guarded by mu_
  grpc::Status first_error_;  // guarded by mu_
  std::string first_where_;   // guarded by mu_
  std::thread reader_;        // last: uses everything above
};

EtcdFeed::~EtcdFeed() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
    // Thread-safe in gRPC; a stream not yet started is cancelled at its
    // start (open() checks stopping_ under mu_ before it starts one).
    if (live_ != nullptr) live_->ctx.TryCancel();
  }
  cv_.notify_all();
  if (reader_.joinable()) reader_.join();
}

void EtcdFeed::bump() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++changes_;
  }
  cv_.notify_all();
}

grpc::Status EtcdFeed::open(std::size_t endpoint,
                            std::unique_ptr<Stream>* out) {
  if (conn_.options().user.empty()) return open_once(endpoint, "", out);
  std::uint64_t refused = 0;  // the token generation etcd refused
  for (int attempt = 0;; ++attempt) {
    std::string token;
    std::uint64_t gen = 0;
    grpc::Status st = conn_.token(conn_.endpoints_[endpoint],
                                  steady_clock::now() + conn_.attempt_timeout_,
                                  refused, &token, &gen);
    if (!st.ok()) return st;
    st = open_once(endpoint, token, out);
    // etcd refuses the watch of a token it no longer takes (expired, or
    // issued before the auth store last changed) as "permission denied":
    // log in again, once.
    if (st.ok() || attempt > 0 ||
        st.error_code() != grpc::StatusCode::PERMISSION_DENIED) {
      return st;
    }
    refused = gen;
  }
}

grpc::Status EtcdFeed::open_once(std::size_t endpoint, const std::string& token,
                                 std::unique_ptr<Stream>* out) {
  auto s = std::make_unique<Stream>();
  conn_.deadline_of(&s->ctx, steady_clock::now() + kStreamLife, token);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return grpc::Status::CANCELLED;
    live_ = s.get();
  }
  auto close = [&](grpc::Status st) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      live_ = nullptr;
    }
    if (s->rw) {
      s->ctx.TryCancel();
      (void)s->rw->Finish();
    }
    return st;
  };
  s->rw = conn_.endpoints_[endpoint].watch->Watch(&s->ctx);
  pb::WatchRequest req;
  auto* c = req.mutable_create_request();
  c->set_key(key_);
  c->set_range_end(range_end_);
  if (!s->rw->Write(req)) {
    grpc::Status st = s->rw->Finish();
    s->rw.reset();
    return close(st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                        "the watch stream ended")
                         : st);
  }
  pb::WatchResponse resp;
  for (;;) {
    if (!s->rw->Read(&resp)) {
      grpc::Status st = s->rw->Finish();
      s->rw.reset();
      return close(st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                          "the watch stream ended")
                           : st);
    }
    // etcd answers a refused watch (no permission on the range) with a
    // response that is both created and canceled.
    if (resp.canceled()) {
      return close(grpc::Status(
          resp.cancel_reason().find("permission denied") != std::string::npos
              ? grpc::StatusCode::PERMISSION_DENIED
              : grpc::StatusCode::UNAVAILABLE,
          resp.cancel_reason().empty() ? "the watch was cancelled"
                                       : resp.cancel_reason()));
    }
    if (resp.created()) break;
  }
  *out = std::move(s);
  return grpc::Status::OK;
}

bool EtcdFeed::drain(Stream& s) {
  pb::WatchResponse resp;
  while (s.rw->Read(&resp)) {
    if (resp.canceled()) break;
    if (resp.events_size() > 0) bump();
  }
  std::lock_guard<std::mutex> lk(mu_);
  live_ = nullptr;
  return stopping_;
}

void EtcdFeed::run() {
  // Arming: each member once, from the current one.
  const std::size_t n = conn_.endpoints_.size();
  std::unique_ptr<Stream> s;
  std::size_t ep = conn_.current();
  for (std::size_t i = 0; i < n && !s; ++i, ep = (ep + 1) % n) {
    grpc::Status st = open(ep, &s);
    if (st.ok()) break;
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return;
    if (i == 0 || st.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      first_error_ = st;
      first_where_ = conn_.endpoints_[ep].address;
    }
    if (st.error_code() == grpc::StatusCode::PERMISSION_DENIED) break;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    armed_ = s ? 1 : 2;
  }
  cv_.notify_all();
  if (!s) return;
  milliseconds pause = kRetryFirst;
  for (;;) {
    const bool stop = drain(*s);  // the destructor cancelled it
    s->ctx.TryCancel();
    (void)s->rw->Finish();
    s.reset();
    if (stop) return;
    bump();  // broken (or at its end): the waiter returns at once
    // Move on to the next member (this one may be gone), as the calls do.
    std::size_t i = ep;
    conn_.current_.compare_exchange_strong(i, i + 1);
    while (!s) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait_for(lk, pause, [&] { return stopping_; });
        if (stopping_) return;
      }
      ep = conn_.current();
      if (open(ep, &s).ok()) break;
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (stopping_) return;
      }
      i = ep;
      conn_.current_.compare_exchange_strong(i, i + 1);
      pause = std::min(kRetryLast, pause * 2);
    }
    pause = kRetryFirst;
    // Open again: what changed while no stream was open shows in the
    // caller's next read, which follows this wake.
    bump();
  }
}

Status EtcdFeed::arm(const CallContext& ctx) {
  reader_ = std::thread([this] { run(); });
  const SteadyTime end =
      std::min(steady_deadline(ctx),
               steady_clock::now() + conn_.options().request_timeout);
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_until(lk, end, [&] { return armed_ != 0; });
  if (armed_ == 1) return {};
  if (armed_ == 0) {
    return Error(ctx.expired() ? Errc::timeout : Errc::unavailable,
                 "etcd watch of " + key_ + ": no member confirmed it in time");
  }
  if (first_error_.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
      first_error_.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    return conn_.denied("watch", first_where_, first_error_, false);
  }
  return Error(Errc::unavailable, "etcd watch of " + key_ +
                                      " failed: etcd at " + first_where_ +
                                      ": " + first_error_.error_message());
}

std::optional<Grant> EtcdFeed::wait_change(Clock::time_point until,
                                           const CallContext& ctx) {
  const SteadyTime end = std::min(steady_at(until, ctx), steady_deadline(ctx));
  std::unique_lock<std::mutex> lk(mu_);
  auto done = [&] { return changes_ != seen_ || interrupted() || stopping_; };
  if (end == SteadyTime::max()) {
    cv_.wait(lk, done);
  } else {
    cv_.wait_until(lk, end, done);
  }
  seen_ = changes_;
  return std::nullopt;
}

void EtcdFeed::interrupt() {
  Waitable::interrupt();
  // Under mu_: a waiter checks interrupted() under it, so it either saw
  // the flag or is asleep and gets this notify.
  std::lock_guard<std::mutex> lk(mu_);
  cv_.notify_all();
}

Result<std::unique_ptr<Waitable>> EtcdStore::watch(std::string_view prefix,
                                                   const CallContext& ctx) {
  const std::string from = options_.prefix + "/l/" + escape_name(prefix);
  auto feed = std::make_unique<EtcdFeed>(*conn_, from, prefix_end(from));
  if (Status st = feed->arm(ctx); !st.ok()) return st.error();
  return std::unique_ptr<Waitable>(std::move(feed));
}

}  // namespace baton::store::etcd
