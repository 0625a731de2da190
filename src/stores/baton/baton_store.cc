// stores/baton/baton_store.cc — see baton_store.h.
#include "stores/baton/baton_store.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "proto/commands.h"
#include "stores/baton/baton_watch.h"
#include "stores/baton/conn.h"
#include "stores/baton/withdrawer.h"

namespace baton::store {
namespace {

using baton_conn::AskInFlight;
using baton_conn::Conn;
using baton_conn::Deadline;
using baton_conn::Withdrawer;
using proto::Reply;
using std::chrono::steady_clock;

// An older batond's refusal of a LOCK.ACQUIRE option it does not know
// (BRIEF, QUEUED): it changed nothing.
bool refuses_option(const Reply& r, std::string_view option) {
  return r.type == Reply::Type::error &&
         r.str.find("option \"" + std::string(option) + "\"") !=
             std::string::npos;
}

// batond's own answer that a waiting request's wait ran out.
bool wait_ran_out(const Reply& r) {
  return r.type == Reply::Type::error && r.str.starts_with("timeout ");
}

struct Settings {
  std::string host;
  std::uint16_t port = 0;
  std::string user, password;
  milliseconds request_timeout{5000};
  std::size_t max_idle = 32;
  std::shared_ptr<tls::TlsContext> tls;  // batons:// (or tls=1) only
  std::string safe_url;
};

class BatonStore;

// The release a Withdrawer repeats (defined after BatonStore).
void release_now(BatonStore& s, const std::string& name,
                 const OwnerToken& token);
Withdrawer::Release releaser(BatonStore& s) {
  return [&s](const std::string& name, const OwnerToken& token) {
    release_now(s, name, token);
  };
}

class BatonRequest final : public Request {
 public:
  BatonRequest(BatonStore& s, const AcquireSpec& spec)
      : s_(s),
        spec_(spec),
        withdrawer_(releaser(s), std::span(&spec_.name, 1), spec_.token) {}
  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override;
  // After a `queued` answer: batond's final answer on the ask's own
  // connection. Otherwise asks again (idempotent by owner token).
  Result<Answer> look(milliseconds wait_left, const CallContext& ctx) override;
  Result<Answer> withdraw(const CallContext& ctx) override;
  void interrupt() override {
    Waitable::interrupt();
    withdrawer_.stop();
  }

 private:
  // batond's final answer to an ask that waited `wait`.
  Result<Answer> settle(const Reply& r, milliseconds wait) const;

  BatonStore& s_;
  const AcquireSpec spec_;
  Withdrawer withdrawer_;
  // The connection of an ask that batond answered `+queued`: its final
  // answer comes on it (look() reads it). Closing it (withdraw, the
  // request's end) makes batond drop the waiting request.
  std::unique_ptr<Conn> held_;
};

class BatonMulti final : public MultiRequest {
 public:
  BatonMulti(BatonStore& s, const MultiSpec& spec)
      : s_(s),
        spec_(spec),
        withdrawer_(releaser(s), spec_.names, spec_.reservation) {}
  Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                          const CallContext& ctx) override;
  Result<MultiAnswer> withdraw(const CallContext& ctx) override;
  void interrupt() override {
    Waitable::interrupt();
    withdrawer_.stop();
  }

 private:
  BatonStore& s_;
  const MultiSpec spec_;
  Withdrawer withdrawer_;
};

class BatonStore final : public baton::Store {
 public:
  explicit BatonStore(Settings settings) : set_(std::move(settings)) {}

  // One connection made (TLS handshake and AUTH included) and kept idle.
  Status check_credentials() {
    auto c = take(steady_clock::now() + set_.request_timeout);
    if (!c) return c.error();
    give_back(std::move(*c));
    return {};
  }

  std::unique_ptr<Request> request(const AcquireSpec& spec) override {
    return std::make_unique<BatonRequest>(*this, spec);
  }
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override {
    return std::make_unique<BatonMulti>(*this, spec);
  }

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override {
    auto r = call(ctx, milliseconds{0}, nullptr, [&](proto::RespWriter& w) {
      proto::encode_extend(w, name, token, ttl);
    });
    if (!r) return r.error();
    return proto::read_grant(*r);
  }

  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override {
    auto r = call(ctx, milliseconds{0}, nullptr, [&](proto::RespWriter& w) {
      proto::encode_release(w, name, token);
    });
    if (!r) return r.error();
    return proto::read_release(*r);
  }

  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override {
    auto r = call(ctx, milliseconds{0}, nullptr, [&](proto::RespWriter& w) {
      proto::encode_describe(w, name);
    });
    if (!r) return r.error();
    return proto::read_lock_info(*r);
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override {
    auto r = call(ctx, milliseconds{0}, nullptr, [&](proto::RespWriter& w) {
      proto::encode_list(w, prefix, limit);
    });
    if (!r) return r.error();
    return proto::read_lock_infos(*r);
  }

  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx) override {
    return counter(proto::CounterCommand::Op::get, name, 0, ctx);
  }
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx) override {
    return counter(proto::CounterCommand::Op::add, name, delta, ctx);
  }
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx) override {
    return counter(proto::CounterCommand::Op::take, name, n, ctx);
  }

  bool supports_shared() const override { return true; }

  // LOCK.WATCH on a connection of the feed's own (stores/baton/
  // baton_watch.h); no feed (callers poll) from a batond without it.
  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                          const CallContext& ctx) override {
    const milliseconds left = ctx.left();
    const bool ctx_bound = left < set_.request_timeout;
    const Deadline d =
        steady_clock::now() + (ctx_bound ? left : set_.request_timeout);
    auto c = take(d);
    if (!c) return past_deadline(c.error(), ctx_bound, d);
    auto armed = baton_conn::arm_watch(**c, prefix, d);
    if (!armed) return past_deadline(armed.error(), ctx_bound, d);
    if (!*armed) {
      give_back(std::move(*c));
      return std::unique_ptr<Waitable>();
    }
    return baton_conn::make_watch(
        std::string(prefix), std::move(*c),
        [this](Deadline dl) { return take(dl); }, set_.request_timeout);
  }
  Result<std::string> history(std::string_view name,
                              const CallContext& ctx) override;
  std::string safe_url() const override { return set_.safe_url; }

  // LOCK.ACQUIRE with BRIEF (and for a wait QUEUED) while batond takes
  // them: batond's reply, or an I/O error. An interim `+queued` leaves the
  // connection in *held (the final answer follows on it).
  Result<Reply> acquire(const AcquireSpec& spec, milliseconds wait,
                        const CallContext& ctx, Withdrawer& w,
                        std::unique_ptr<Conn>* held) {
    // BRIEF: a grant of the lease asked for comes back as its four unknown
    // fields; QUEUED: a request that waits is answered `+queued <place>`
    // first, so the engine sees the wait start without a try first
    // (docs/protocol.md). A batond older than either refuses the option by
    // name and changes nothing: ask again without it, and no more on this
    // store (each flag falls once, so this loops at most three times).
    for (;;) {
      const bool brief = brief_.load(std::memory_order_relaxed);
      const bool queued =
          wait.count() > 0 && queued_.load(std::memory_order_relaxed);
      auto r = call(
          ctx, wait, &w,
          [&](proto::RespWriter& out) {
            proto::encode_acquire(out, spec, wait, brief, queued);
          },
          queued ? held : nullptr);
      if (r && brief && refuses_option(*r, "BRIEF")) {
        brief_.store(false, std::memory_order_relaxed);
      } else if (r && queued && refuses_option(*r, "QUEUED")) {
        queued_.store(false, std::memory_order_relaxed);
      } else {
        return r;
      }
    }
  }

  Result<Reply> acquire_multi(const MultiSpec& spec, milliseconds wait,
                              const CallContext& ctx, Withdrawer& w) {
    return call(ctx, wait, &w, [&](proto::RespWriter& out) {
      proto::encode_multi(out, spec, wait);
    });
  }

  // One command: batond's reply within request_timeout (+ `wait`, the time
  // batond may park it) and the call's deadline. A deadline of the call
  // that passed with no answer is a timeout; the connection is dropped.
  // `w`: the ask's Withdrawer, which may shut the connection down while
  // it waits (null for other calls). `held`: an interim `+queued` reply
  // moves the connection there instead of back to the pool.
  template <typename Encode>
  Result<Reply> call(const CallContext& ctx, milliseconds wait, Withdrawer* w,
                     Encode&& encode, std::unique_ptr<Conn>* held = nullptr) {
    const auto now = steady_clock::now();
    const milliseconds own = set_.request_timeout + wait;
    const milliseconds left = ctx.left();
    const bool ctx_bound = left < own;
    const Deadline deadline = now + (ctx_bound ? left : own);
    auto c = take(deadline);
    if (!c) return past_deadline(c.error(), ctx_bound, deadline);
    if (w != nullptr) w->attach((*c)->fd());
    auto r = (*c)->call(encode, deadline);
    const bool shut = w != nullptr && w->detach();
    if (!r) return past_deadline(r.error(), ctx_bound, deadline);
    std::uint32_t place = 0;
    if (held != nullptr && proto::read_queued(*r, &place)) {
      if (!(*c)->broken() && !shut) *held = std::move(*c);
      return r;  // with a dropped connection the request is gone too
    }
    if (!(*c)->broken() && !shut) give_back(std::move(*c));
    return r;
  }

  // The rest of an ask whose connection `c` batond answered `+queued`:
  // its final answer, bounded as call() bounds the ask.
  Result<Reply> finish(std::unique_ptr<Conn> c, milliseconds wait,
                       const CallContext& ctx, Withdrawer& w) {
    const milliseconds own = set_.request_timeout + wait;
    const milliseconds left = ctx.left();
    const bool ctx_bound = left < own;
    const Deadline deadline = steady_clock::now() + (ctx_bound ? left : own);
    w.attach(c->fd());
    auto r = c->next_reply(deadline);
    const bool shut = w.detach();
    if (!r) return past_deadline(r.error(), ctx_bound, deadline);
    if (!c->broken() && !shut) give_back(std::move(c));
    return r;
  }

 private:
  Result<std::int64_t> counter(proto::CounterCommand::Op op,
                               std::string_view name, std::int64_t n,
                               const CallContext& ctx) {
    auto r = call(ctx, milliseconds{0}, nullptr, [&](proto::RespWriter& w) {
      proto::encode_counter(w, op, name, n);
    });
    if (!r) return r.error();
    return proto::read_integer(*r);
  }

  static Error past_deadline(Error e, bool ctx_bound, Deadline deadline) {
    if (ctx_bound && steady_clock::now() >= deadline &&
        e.code() == Errc::unavailable) {
      return Error(Errc::timeout, e.message());
    }
    return e;
  }

  Result<std::unique_ptr<Conn>> take(Deadline deadline);
  Status authenticate(Conn& c, Deadline deadline);

  void give_back(std::unique_ptr<Conn> c) {
    std::lock_guard<std::mutex> g(mu_);
    if (idle_.size() < set_.max_idle) idle_.push_back(std::move(c));
  }

  const Settings set_;
  std::atomic<bool> brief_{true};   // batond takes LOCK.ACQUIRE … BRIEF
  std::atomic<bool> queued_{true};  // batond takes LOCK.ACQUIRE … QUEUED
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;  // mu_
  milliseconds backoff_{0};                  // mu_
  Deadline next_connect_{};                  // mu_
};

Result<std::unique_ptr<Conn>> BatonStore::take(Deadline deadline) {
  Deadline not_before;
  {
    std::lock_guard<std::mutex> g(mu_);
    while (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      if (c->healthy()) return c;
    }
    not_before = next_connect_;
  }
  // Back off after recent connect failures (never beyond the deadline).
  if (not_before > steady_clock::now()) {
    std::this_thread::sleep_until(std::min(not_before, deadline));
  }
  auto c = Conn::connect(
      set_.host, set_.port,
      std::min(deadline, steady_clock::now() + set_.request_timeout), set_.tls);
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!c) {
      backoff_ = backoff_.count() == 0
                     ? milliseconds(50)
                     : std::min(backoff_ * 2, milliseconds(1000));
      next_connect_ = steady_clock::now() + backoff_;
      return c.error();
    }
    backoff_ = milliseconds(0);
  }
  if (Status s = authenticate(**c, deadline); !s.ok()) return s.error();
  return c;
}

// baton://user:pass@host: AUTH [user] pass (batond's users).
Status BatonStore::authenticate(Conn& c, Deadline deadline) {
  if (set_.password.empty()) return {};
  auto r = c.call(
      [&](proto::RespWriter& w) {
        w.array(set_.user.empty() ? 2 : 3);
        w.bulk("AUTH");
        if (!set_.user.empty()) w.bulk(set_.user);
        w.bulk(set_.password);
      },
      deadline);
  if (!r) return r.error();
  if (!proto::is_failure(*r)) return {};
  Error e = proto::error_from_reply(*r);
  if (e.code() == Errc::unavailable) return e;  // e.g. the wrong port
  return Error(Errc::permission_denied, "batond refused the password for " +
                                            set_.safe_url + ": " + e.message());
}

void release_now(BatonStore& s, const std::string& name,
                 const OwnerToken& token) {
  const CallContext ctx(Clock::steady()->now() + Withdrawer::kGiveUp);
  (void)s.call(ctx, milliseconds{0}, nullptr, [&](proto::RespWriter& w) {
    proto::encode_release(w, name, token);
  });
}

Error withdrawn_before_sent() {
  return Error(Errc::not_acquired, "the request was withdrawn (stopped)");
}

// --- BatonRequest
// --------------------------------------------------------------

Result<Answer> BatonRequest::ask(AskMode mode, milliseconds wait_left,
                                 const CallContext& ctx) {
  const AskInFlight in_flight(withdrawer_);
  if (!in_flight.started())
    return Answer::refused_with(withdrawn_before_sent());
  const milliseconds wait =
      mode == AskMode::wait ? wait_left : milliseconds::zero();
  held_.reset();  // a request re-asked: its earlier wait is over
  auto r = s_.acquire(spec_, wait, ctx, withdrawer_, &held_);
  if (!r) return r.error();
  Answer q;
  if (held_ != nullptr && proto::read_queued(*r, &q.position)) {
    q.kind = Answer::Kind::queued;
    q.look_at = Clock::time_point::min();  // look() reads the final answer
    return q;
  }
  return settle(*r, wait);
}

Result<Answer> BatonRequest::look(milliseconds wait_left,
                                  const CallContext& ctx) {
  if (held_ == nullptr) return ask(AskMode::wait, wait_left, ctx);
  std::unique_ptr<Conn> c = std::move(held_);
  const AskInFlight in_flight(withdrawer_);
  // Stopped: closing `c` (here) drops the waiting request in batond.
  if (!in_flight.started()) {
    return Answer::refused_with(withdrawn_before_sent());
  }
  auto r = s_.finish(std::move(c), wait_left, ctx, withdrawer_);
  if (!r) return r.error();
  return settle(*r, wait_left);
}

Result<Answer> BatonRequest::settle(const Reply& r, milliseconds wait) const {
  if (wait > milliseconds::zero() && wait_ran_out(r)) {
    Answer a;
    a.kind = Answer::Kind::expired;
    a.gone = true;  // batond removed it from the queue
    return a;
  }
  auto g = proto::read_grant(r, spec_);
  if (g) return Answer::granted_with(std::move(*g));
  if (g.error().code() != Errc::not_acquired) return g.error();
  // A try that found the lock taken (with its holders), or a waiting
  // request withdrawn by its owner token: batond keeps nothing of either.
  return Answer::refused_with(std::move(g).error());
}

Result<Answer> BatonRequest::withdraw(const CallContext& ctx) {
  held_.reset();  // batond drops a request whose connection closed
  // Releasing the token withdraws a queued request and gives back a lease
  // granted meanwhile (its grant was not received: nobody holds it).
  auto r = s_.release(spec_.name, spec_.token, ctx);
  if (!r) return r.error();
  Answer a;
  a.kind = Answer::Kind::expired;
  a.gone = true;
  return a;
}

// --- BatonMulti
// ----------------------------------------------------------------

Result<MultiAnswer> BatonMulti::ask(AskMode mode, milliseconds wait_left,
                                    const CallContext& ctx) {
  MultiAnswer a;
  const AskInFlight in_flight(withdrawer_);
  if (!in_flight.started()) {
    a.kind = MultiAnswer::Kind::refused;
    a.error = withdrawn_before_sent();
    a.gone = true;
    return a;
  }
  const milliseconds wait =
      mode == AskMode::wait ? wait_left : milliseconds::zero();
  auto r = s_.acquire_multi(spec_, wait, ctx, withdrawer_);
  if (!r) return r.error();
  if (wait > milliseconds::zero() && wait_ran_out(*r)) {
    a.kind = MultiAnswer::Kind::expired;
    a.gone = true;
    return a;
  }
  auto grants = proto::read_grants(*r);
  if (!grants) {
    if (grants.error().code() != Errc::not_acquired) return grants.error();
    a.kind = MultiAnswer::Kind::refused;
    a.error = std::move(grants).error();
    a.gone = true;
    return a;
  }
  // batond answers with every lease the reservation holds among the names
  // (acquire_all: all of them or an error).
  a.grants = std::move(*grants);
  a.pending =
      spec_.names.size() - std::min(spec_.names.size(), a.grants.size());
  return a;
}

Result<MultiAnswer> BatonMulti::withdraw(const CallContext& ctx) {
  for (const auto& n : spec_.names) {
    auto r = s_.release(n, spec_.reservation, ctx);
    if (!r) return r.error();
  }
  MultiAnswer a;
  a.kind = MultiAnswer::Kind::expired;
  a.gone = true;
  return a;
}

// --- open
// ----------------------------------------------------------------------

Result<std::unique_ptr<baton::Store>> open_baton(const StoreUrl& url) {
  auto bad = [&](const std::string& why) {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe + "\": " + why);
  };
  if (url.hosts.size() != 1) return bad("must name exactly one host[:port]");
  const OptionValues& o = url.options;
  Settings s;
  s.host = url.hosts.front().host;
  s.port = url.hosts.front().port;
  s.user = url.user;
  auto password = store_password(url, "BATON_PASSWORD");
  if (!password.ok()) return std::move(password).error();
  s.password = std::move(*password);
  s.request_timeout = o.duration("request_timeout");
  s.max_idle = static_cast<std::size_t>(o.count("max_idle_connections"));
  s.safe_url = url.safe;
  tls::TlsOptions tls_options;
  tls_options.ca = o.text("ca");
  tls_options.cert = o.text("cert");
  tls_options.key = o.text("key");
  const bool tls = url.scheme == "batons" || o.flag("tls");
  for (const char* k : {"ca", "cert", "key"}) {
    if (!o.given(k)) continue;
    if (!tls) return bad("TLS options need batons:// (or tls=1)");
    if (o.text(k).empty()) return bad(std::string(k) + " is empty");
  }
  if (tls) {
    auto t = tls::TlsContext::create(tls_options);
    if (!t) return bad(t.error().message());
    s.tls = std::move(*t);
  }
  const bool check = tls || !s.password.empty();
  auto store = std::make_unique<BatonStore>(std::move(s));
  // Credentials and certificates are checked now, so that a wrong password
  // or an untrusted certificate fails open(), not the first call. A batond
  // that is not up yet is not an error: connections are made when needed.
  if (check) {
    if (Status st = store->check_credentials(); !st.ok()) {
      if (st.error().code() != Errc::unavailable ||
          st.error().message().rfind(baton_conn::kCannotConnect, 0) != 0) {
        return st.error();
      }
    }
  }
  return std::unique_ptr<baton::Store>(std::move(store));
}

}  // namespace

// LOCK.HISTORY: batond's recorded history of one lock, as JSON.
Result<std::string> BatonStore::history(std::string_view name,
                                        const CallContext& ctx) {
  auto r = call(ctx, milliseconds{0}, nullptr,
                [&](proto::RespWriter& w) { proto::encode_history(w, name); });
  if (!r) return r.error();
  if (proto::is_failure(*r)) return proto::error_from_reply(*r);
  if (r->type != Reply::Type::string) {
    return Error(Errc::internal, "batond answered LOCK.HISTORY with no text");
  }
  return std::move(r->str);
}

const StoreDescriptor& baton_descriptor() {
  static const StoreDescriptor d = [] {
    StoreDescriptor b;
    b.name = "baton";
    b.schemes = {"baton", "batons"};
    b.summary = "batond, baton's lock server (batons://: over TLS)";
    b.url_form = "baton[s]://[[user]:password@]host[:port]";
    b.default_port = proto::kDefaultPort;
    OptionSpec timeout = request_timeout_option("5s");
    timeout.aliases = {"timeout_ms"};
    OptionSpec idle = count_option("max_idle_connections", "32", 1,
                                   "idle connections kept for reuse");
    idle.aliases = {"pool"};
    b.options = {
        timeout,
        idle,
        flag_option("tls", "0",
                    "speak TLS to batond's tls_listen port (what batons:// "
                    "means)"),
        // Files, read when the store opens (batons:// only, so they are
        // checked there, with the TLS context, not by the URL parser).
        text_option("ca", "",
                    "CA certificates (PEM file) batond's certificate must "
                    "chain to; default: the system CAs"),
        text_option("cert", "", "client certificate (PEM file), with key"),
        text_option("key", "",
                    "the client certificate's private key (PEM file)"),
    };
    for (OptionSpec& p : password_options("BATON_PASSWORD")) {
      b.options.push_back(std::move(p));
    }
    b.open = open_baton;
    return b;
  }();
  return d;
}

}  // namespace baton::store
