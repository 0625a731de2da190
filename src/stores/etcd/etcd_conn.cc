// stores/etcd/etcd_conn.cc — gRPC calls, deadlines and endpoint failover of
// the etcd:// store.
#include "stores/etcd/etcd_conn.h"

#include <algorithm>
#include <thread>

namespace baton::store::etcd {

using std::chrono::steady_clock;

SteadyTime steady_at(Clock::time_point t, const CallContext& ctx) {
  if (t == Clock::time_point::max()) return SteadyTime::max();
  const auto left = t - ctx.now();
  return steady_clock::now() +
         std::max(left, Clock::time_point::duration::zero());
}

std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& c = prefix.back();
    if (static_cast<unsigned char>(c) < 0xff) {
      c = static_cast<char>(static_cast<unsigned char>(c) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

void compare_create(pb::TxnRequest* t, const std::string& key,
                    std::int64_t rev) {
  auto* c = t->add_compare();
  c->set_key(key);
  c->set_target(pb::Compare::CREATE);
  c->set_create_revision(rev);
}

void compare_mod(pb::TxnRequest* t, const std::string& key, std::int64_t rev) {
  auto* c = t->add_compare();
  c->set_key(key);
  c->set_target(pb::Compare::MOD);
  c->set_mod_revision(rev);
}

void put_same_lease(pb::RequestOp* op, const std::string& key,
                    std::string value) {
  auto* put = op->mutable_request_put();
  put->set_key(key);
  put->set_value(std::move(value));
  put->set_ignore_lease(true);
}

Conn::Conn(Options options)
    : options_(std::move(options)),
      attempt_timeout_(
          std::max(milliseconds(1000), options_.request_timeout / 3)) {
  grpc::ChannelArguments args;
  // A member that went away must be noticed within the request timeout.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // gRPC also takes this as its minimum connect timeout: a connection
  // attempt (the TLS handshake included) is abandoned after max(it, the
  // current backoff). 100 ms lets a connection to a member that does not
  // answer fail soon. Over TLS a handshake on a loaded machine was seen to
  // outlast 100 ms, and the 1 s backoff, attempt after attempt (the member
  // logged each abandoned handshake as "rejected connection ... EOF"), so
  // there an attempt gets 5 s; a call still moves on to the next member at
  // its own attempt deadline.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, options_.tls ? 5000 : 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options_.tls) {
    // gRPC checks that the certificate chains to the roots and names the
    // endpoint's host (an IP literal against its IP addresses).
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.ca_pem;  // "": gRPC's default roots
    ssl.pem_cert_chain = options_.cert_pem;
    ssl.pem_private_key = options_.key_pem;
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  for (const auto& address : options_.endpoints) {
    if (!where_.empty()) where_ += ",";
    where_ += address;
    Endpoint ep;
    ep.address = address;
    ep.channel = grpc::CreateCustomChannel(address, creds, args);
    ep.kv = pb::KV::NewStub(ep.channel);
    ep.watch = pb::Watch::NewStub(ep.channel);
    ep.lease = pb::Lease::NewStub(ep.channel);
    ep.auth = pb::Auth::NewStub(ep.channel);
    endpoints_.push_back(std::move(ep));
  }
}

void Conn::deadline_of(grpc::ClientContext* ctx, SteadyTime end,
                       const std::string& token) const {
  // On gRPC's monotonic clock: a step of the wall clock (NTP, the torture
  // harness's clock_step) must not move the deadline.
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
      std::max<steady_clock::duration>(end - steady_clock::now(), {}));
  ctx->set_deadline(
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                   gpr_time_from_micros(left.count(), GPR_TIMESPAN)));
  // etcd's "require leader" metadata (clientv3's WithRequireLeader): a
  // member without a leader answers at once ("etcdserver: no leader",
  // UNAVAILABLE) instead of holding the request until its own timeout,
  // and ends a watch stream on such a member. hasleader=true also makes a
  // member that loses its leader end a watch stream, so the call moves on
  // to another member.
  ctx->AddMetadata("hasleader", "true");
  // etcd's rpctypes.TokenFieldNameGRPC.
  if (!token.empty()) ctx->AddMetadata("token", token);
}

namespace {

// etcd refused the token the call carried, and a new login may help: an
// unknown or expired token (ErrGRPCInvalidAuthToken, UNAUTHENTICATED), a
// token issued before the auth store last changed (ErrGRPCAuthOldRevision),
// or a call sent without one after auth was enabled (ErrGRPCUserEmpty).
bool token_refused(const grpc::Status& st) {
  const std::string& m = st.error_message();
  return st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         m.find("revision of auth store is old") != std::string::npos ||
         m.find("user name is empty") != std::string::npos;
}

// A refusal by etcd's auth layer: no retry on another member helps.
bool auth_refusal(const grpc::Status& st) {
  const std::string& m = st.error_message();
  return st.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
         st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         m.find("etcdserver: authentication failed") != std::string::npos ||
         m.find("etcdserver: user name") != std::string::npos ||
         m.find("etcdserver: permission denied") != std::string::npos;
}

bool transient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE ||
         code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::CANCELLED ||
         code == grpc::StatusCode::UNKNOWN;
}

}  // namespace

grpc::Status Conn::token(Endpoint& ep, SteadyTime end, std::uint64_t refused,
                         std::string* token, std::uint64_t* gen) {
  // Called with token_mu_ held.
  auto fresh = [&] {
    return token_gen_ != 0 && token_gen_ != refused &&
           steady_clock::now() - token_at_ < options_.token_refresh;
  };
  {
    std::lock_guard<std::mutex> lk(token_mu_);
    if (fresh()) {
      *token = token_;
      *gen = token_gen_;
      return grpc::Status::OK;
    }
  }
  // One login at a time: the callers that found the token due or refused
  // meanwhile take the one it gets. A caller waits for another's login only
  // until its own attempt's end (rule 7: that login may have a later
  // deadline than this call).
  std::unique_lock<std::timed_mutex> login(auth_mu_, std::defer_lock);
  if (!login.try_lock_until(end)) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "another call's login did not end in time");
  }
  {
    std::lock_guard<std::mutex> lk(token_mu_);
    if (fresh()) {
      *token = token_;
      *gen = token_gen_;
      return grpc::Status::OK;
    }
  }
  grpc::ClientContext c;
  deadline_of(&c, end, "");
  pb::AuthenticateRequest req;
  req.set_name(options_.user);
  req.set_password(options_.password);
  pb::AuthenticateResponse resp;
  const grpc::Status st = ep.auth->Authenticate(&c, req, &resp);
  std::string got;
  if (st.ok()) {
    got = resp.token();
    authentications_.fetch_add(1);
  } else if (st.error_code() != grpc::StatusCode::FAILED_PRECONDITION ||
             st.error_message().find("authentication is not enabled") ==
                 std::string::npos) {
    return st;
  }
  // Authentication off on the server: calls go without a token, as etcd's
  // own client does, and the next refresh looks again.
  std::lock_guard<std::mutex> lk(token_mu_);
  token_ = std::move(got);
  ++token_gen_;
  token_at_ = steady_clock::now();
  *token = token_;
  *gen = token_gen_;
  return grpc::Status::OK;
}

std::string Conn::watch_token(std::size_t endpoint, SteadyTime end) {
  if (options_.user.empty()) return {};
  std::string t;
  std::uint64_t gen = 0;
  if (token(endpoints_[endpoint],
            std::min(end, steady_clock::now() + attempt_timeout_), 0, &t, &gen)
          .ok()) {
    return t;
  }
  // The stream is then refused and its waiter reads again (a call, which
  // says why).
  std::lock_guard<std::mutex> lk(token_mu_);
  return token_;
}

Error Conn::denied(const char* what, const std::string& address,
                   const grpc::Status& st, bool login) const {
  const std::string& m = st.error_message();
  const std::string who =
      options_.user.empty()
          ? std::string("this client (no user given") +
                (options_.cert_pem.empty()
                     ? ")"
                     : "; etcd takes the client certificate's CN as the "
                       "user)")
          : "user \"" + options_.user + "\"";
  std::string msg = "etcd:// at " + address + ": ";
  if (login) {
    msg += who + " could not log in (" + m + ")" +
           (m.find("authentication failed") != std::string::npos
                ? ": check the user and its password"
                : "");
  } else if (m.find("user name is empty") != std::string::npos) {
    msg += "etcd requires authentication (" + m +
           "): give a user and its password (etcds://USER@host:port/prefix"
           "?password_file=...) or a client certificate whose CN is an etcd "
           "user";
  } else {
    msg += who + " was refused the etcd " + what + " under key prefix \"" +
           options_.prefix + "\" (" + m +
           "): grant it a role with `etcdctl role grant-permission ROLE "
           "--prefix=true readwrite " +
           options_.prefix + "`";
  }
  return Error(Errc::permission_denied, msg);
}

template <class Resp, class Fn>
Result<Resp> Conn::call(const char* what, const CallContext& ctx, Fn rpc,
                        bool one_pass) {
  const SteadyTime end = std::min(
      steady_clock::now() + options_.request_timeout, steady_deadline(ctx));
  const bool login = !options_.user.empty();
  std::uint64_t refused = 0;  // the token generation etcd refused
  bool resent = false;        // the call was sent again with a new token
  std::string last;
  for (std::size_t attempt = 0;; ++attempt) {
    if (ctx.expired()) {
      return Error(Errc::timeout,
                   std::string("etcd ") + what + ": the call deadline passed" +
                       (last.empty() ? "" : " (last error: " + last + ")"));
    }
    std::size_t i = current();
    Endpoint& ep = endpoints_[i];
    // One attempt gets a third of the request timeout (at least 1 s): a
    // request that was in flight when the leader died is dropped by raft
    // and held by the member until its own timeout (~5 s); the next
    // attempt, after the election, succeeds. Every request the store
    // sends is safe to repeat (guarded by create revision or owner token;
    // a repeated lease grant leaves an unused lease that expires).
    const SteadyTime attempt_end =
        std::min(end, steady_clock::now() + attempt_timeout_);
    std::string tok;
    std::uint64_t gen = 0;
    grpc::Status st;
    if (login) st = token(ep, attempt_end, refused, &tok, &gen);
    const bool login_failed = !st.ok();
    if (st.ok()) {
      grpc::ClientContext rpc_ctx;
      deadline_of(&rpc_ctx, attempt_end, tok);
      Resp resp;
      st = rpc(ep, &rpc_ctx, &resp);
      if (st.ok()) return resp;
    }
    const auto code = st.error_code();
    last = "etcd at " + ep.address + ": " + st.error_message();
    if (login_failed) {
      if (!transient(code)) return denied(what, ep.address, st, true);
    } else if (login && !resent && token_refused(st)) {
      // Expired, or issued before the auth store changed: log in again
      // and send the call once more (on the same member, at once).
      resent = true;
      refused = gen;
      token_retries_.fetch_add(1);
      continue;
    } else if (auth_refusal(st)) {
      return denied(what, ep.address, st, false);
    }
    if (code == grpc::StatusCode::NOT_FOUND) {
      return Error(Errc::lock_lost, std::string("etcd ") + what + ": " + last);
    }
    if (!transient(code)) {
      return Error(code == grpc::StatusCode::INVALID_ARGUMENT ||
                           code == grpc::StatusCode::OUT_OF_RANGE
                       ? Errc::invalid_argument
                       : Errc::internal,
                   std::string("etcd ") + what + " refused by " + last);
    }
    if (steady_clock::now() >= end ||
        (one_pass && attempt + 1 >= endpoints_.size())) {
      if (ctx.expired()) {
        return Error(Errc::timeout, std::string("etcd ") + what +
                                        ": the call deadline passed (" + last +
                                        ")");
      }
      return Error(Errc::unavailable,
                   std::string("etcd ") + what + " failed: " + last);
    }
    current_.compare_exchange_strong(i, i + 1);
    if ((attempt + 1) % endpoints_.size() == 0) {
      // Every member failed once (e.g. during a leader election): pause.
      std::this_thread::sleep_until(
          std::min(end, steady_clock::now() + milliseconds(50)));
    }
  }
}

Result<pb::RangeResponse> Conn::range(const pb::RangeRequest& req,
                                      const CallContext& ctx, bool one_pass) {
  return call<pb::RangeResponse>(
      "range", ctx,
      [&](Endpoint& ep, grpc::ClientContext* gc, pb::RangeResponse* resp) {
        return ep.kv->Range(gc, req, resp);
      },
      one_pass);
}

Result<pb::TxnResponse> Conn::txn(const pb::TxnRequest& req,
                                  const CallContext& ctx) {
  return call<pb::TxnResponse>(
      "txn", ctx,
      [&](Endpoint& ep, grpc::ClientContext* gc, pb::TxnResponse* resp) {
        return ep.kv->Txn(gc, req, resp);
      });
}

Result<pb::LeaseGrantResponse> Conn::lease_grant(std::int64_t ttl_s,
                                                 const CallContext& ctx) {
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  auto r = call<pb::LeaseGrantResponse>(
      "lease grant", ctx,
      [&](Endpoint& ep, grpc::ClientContext* gc, pb::LeaseGrantResponse* resp) {
        return ep.lease->LeaseGrant(gc, req, resp);
      });
  if (r.ok() && !r->error().empty()) {
    return Error(Errc::internal, "etcd lease grant: " + r->error());
  }
  return r;
}

Status Conn::lease_revoke(std::int64_t id, const CallContext& ctx) {
  pb::LeaseRevokeRequest req;
  req.set_id(id);
  auto r = call<pb::LeaseRevokeResponse>(
      "lease revoke", ctx,
      [&](Endpoint& ep, grpc::ClientContext* gc,
          pb::LeaseRevokeResponse* resp) {
        return ep.lease->LeaseRevoke(gc, req, resp);
      });
  if (!r.ok() && r.error().code() != Errc::lock_lost) return r.error();
  return {};
}

Result<std::int64_t> Conn::keep_alive(std::int64_t id, const CallContext& ctx) {
  pb::LeaseKeepAliveRequest req;
  req.set_id(id);
  auto r = call<pb::LeaseKeepAliveResponse>(
      "lease keep-alive", ctx,
      [&](Endpoint& ep, grpc::ClientContext* gc,
          pb::LeaseKeepAliveResponse* resp) {
        auto stream = ep.lease->LeaseKeepAlive(gc);
        if (stream->Write(req)) {
          stream->WritesDone();
          if (stream->Read(resp)) {
            gc->TryCancel();
            (void)stream->Finish();
            return grpc::Status::OK;
          }
        }
        return stream->Finish();
      });
  if (!r.ok()) {
    if (r.error().code() == Errc::lock_lost) return std::int64_t{0};
    return r.error();
  }
  return std::max<std::int64_t>(r->ttl(), 0);
}

Result<std::int64_t> Conn::time_to_live(std::int64_t id,
                                        const CallContext& ctx) {
  pb::LeaseTimeToLiveRequest req;
  req.set_id(id);
  auto r = call<pb::LeaseTimeToLiveResponse>(
      "lease time-to-live", ctx,
      [&](Endpoint& ep, grpc::ClientContext* gc,
          pb::LeaseTimeToLiveResponse* resp) {
        return ep.lease->LeaseTimeToLive(gc, req, resp);
      });
  if (!r.ok()) {
    if (r.error().code() == Errc::lock_lost) return std::int64_t{-1};
    return r.error();
  }
  return r->ttl();
}

WatchStream::WatchStream(Conn& conn, SteadyTime end)
    : conn_(conn), endpoint_(conn.current()), end_(end) {}

void WatchStream::start(const std::vector<WatchSpec>& watches) {
  if (cancelled_.load() || steady_clock::now() >= end_) return;
  conn_.deadline_of(&ctx_, end_, conn_.watch_token(endpoint_, end_));
  stream_ = conn_.endpoints_[endpoint_].watch->Watch(&ctx_);
  for (const auto& w : watches) {
    pb::WatchRequest req;
    auto* c = req.mutable_create_request();
    c->set_key(w.key);
    if (!w.range_end.empty()) c->set_range_end(w.range_end);
    if (!w.puts) c->add_filters(pb::WatchCreateRequest::NOPUT);
    if (!stream_->Write(req)) {
      broken_ = true;
      return;
    }
  }
  std::size_t created = 0;
  pb::WatchResponse resp;
  while (created < watches.size()) {
    if (!stream_->Read(&resp) || resp.canceled()) {
      broken_ = true;
      return;
    }
    if (resp.created()) ++created;
    for (const auto& ev : resp.events()) {
      if (ev.type() == pb::Event::DELETE) {
        early_.push_back(ev.kv().key());
      } else {
        puts_[ev.kv().key()] = ev.kv();
        early_put_ = true;
      }
    }
  }
  ok_ = true;
}

WatchStream::~WatchStream() {
  if (!stream_) return;
  ctx_.TryCancel();
  (void)stream_->Finish();
}

void WatchStream::cancel() {
  cancelled_ = true;
  // Thread-safe in gRPC; before the call starts it cancels it at its start.
  ctx_.TryCancel();
}

bool WatchStream::wait(const std::function<bool(const std::string&)>& wanted) {
  if (cancelled_.load()) return false;
  if (std::exchange(early_put_, false)) return true;
  for (const auto& k : early_) {
    if (!wanted || wanted(k)) return true;
  }
  early_.clear();
  if (ok_ && !broken_) {
    pb::WatchResponse resp;
    while (stream_->Read(&resp)) {
      if (resp.canceled()) return true;
      bool woke = false;
      for (const auto& ev : resp.events()) {
        if (ev.type() != pb::Event::DELETE) {
          puts_[ev.kv().key()] = ev.kv();  // only keys watched with puts
          woke = true;
        } else if (!wanted || wanted(ev.kv().key())) {
          woke = true;
        }
      }
      if (woke) return true;
    }
    broken_ = true;
  }
  if (cancelled_.load() || steady_clock::now() >= end_) return false;
  // The stream broke before its time: this member may be gone. Move on to
  // the next one and have the caller read again.
  std::size_t i = endpoint_;
  conn_.current_.compare_exchange_strong(i, i + 1);
  std::this_thread::sleep_until(
      std::min(end_, steady_clock::now() + milliseconds(20)));
  return true;
}

WatchStream& WatchSlot::open(Conn& conn, const std::vector<WatchSpec>& watches,
                             SteadyTime end) {
  close();
  auto w = std::make_unique<WatchStream>(conn, end);
  WatchStream& out = *w;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (cancelled_) w->cancel();
    w_ = std::move(w);
  }
  out.start(watches);
  return out;
}

void WatchSlot::close() {
  std::unique_ptr<WatchStream> old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    old = std::move(w_);
  }
  // Destroyed outside the lock: its Finish() may take a round trip.
}

void WatchSlot::cancel() {
  std::lock_guard<std::mutex> lk(mu_);
  cancelled_ = true;
  if (w_) w_->cancel();
}

}  // namespace baton::store::etcd
