#include "server/server.h"

#include <spdlog/spdlog.h>

#include <functional>

#include "core/validate.h"
#include "proto/commands.h"
#include "server/connection.h"

namespace baton::server {

namespace {

// How long a stopping batond lets its connections write their last replies.
constexpr auto kStopDrain = std::chrono::seconds(2);

Result<asio::ip::tcp::endpoint> parse_endpoint(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) {
    return Error(Errc::invalid_argument,
                 "listen address \"" + text + "\" is not host:port");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  int port = 0;
  try {
    port = std::stoi(text.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  std::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec || port < 0 || port > 65535) {
    return Error(Errc::invalid_argument,
                 "listen address \"" + text + "\" is not host:port");
  }
  return asio::ip::tcp::endpoint(addr, static_cast<std::uint16_t>(port));
}

Status bind_listener(asio::ip::tcp::acceptor& a, const std::string& text,
                     std::uint16_t* port) {
  auto ep = parse_endpoint(text);
  if (!ep) return ep.error();
  std::error_code ec;
  a.open(ep->protocol(), ec);
  if (!ec) a.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(*ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Error(Errc::unavailable,
                 "cannot listen on " + text + ": " + ec.message());
  }
  *port = a.local_endpoint().port();
  return {};
}

}  // namespace

Server::Server(ServerConfig config)
    : config_(std::move(config)),
      table_(*clock_, core::Limits{config_.max_waiters_per_lock,
                                   core::Limits{}.max_locks}),
      acceptor_(io_),
      metrics_acceptor_(io_),
      tls_acceptor_(io_),
      signals_(io_),
      deadline_timer_(io_),
      batch_timer_(io_),
      history_(config_.history_size, config_.history_window),
      history_sink_(*clock_, history_),
      status_hub_(std::make_unique<statuspage::StreamHub>(
          io_,
          [this](const std::string& prefix, const void* viewer) {
            return status_json(prefix, static_cast<const User*>(viewer));
          },
          [this] { return table_.change_count(); },
          [this] { after_table_call(); })) {}

Server::~Server() { table_.set_change_sink(nullptr); }

Status Server::start() {
  if (!config_.data_dir.empty()) {
    JournalOptions jo;
    jo.dir = config_.data_dir;
    jo.fsync = config_.fsync;
    jo.compact_factor = config_.compact_factor;
    jo.compact_min_bytes = config_.compact_min_bytes;
    jo.repair = config_.repair;
    auto j = Journal::open(jo, table_, *clock_);
    if (!j) return j.error();
    journal_ = std::move(*j);
    table_.set_change_sink(journal_.get());
    const auto& st = journal_->stats();
    std::string torn;
    if (st.torn_tail) {
      torn = ", torn tail of " + std::to_string(st.torn_tail_bytes) +
             " bytes at offset " + std::to_string(st.torn_tail_offset) +
             " ignored";
    }
    if (st.repaired_stretches > 0) {
      spdlog::warn(
          "repair: restored {} leases, {} counters from {} (fencing high "
          "water {}) after dropping {} damaged stretch(es)",
          st.restored_leases, st.restored_counters, config_.data_dir,
          table_.fencing_high_water(), st.repaired_stretches);
    } else {
      spdlog::info(
          "restored {} leases, {} counters from {} (fencing high water {}{})",
          st.restored_leases, st.restored_counters, config_.data_dir,
          table_.fencing_high_water(), torn);
    }
  } else {
    spdlog::warn("no data_dir: leases are not persisted");
  }
  // The history sink sits in front of the journal; it learns the restored
  // leases so that their ends are recorded too.
  if (config_.history_size > 0) {
    table_.for_each_lease(
        [this](const core::LeaseRecord& l) { history_sink_.seed(l); });
    history_sink_.set_next(journal_.get());
    table_.set_change_sink(&history_sink_);
  }
  Status s = bind_listener(acceptor_, config_.listen, &port_);
  if (!s) return s;
  asio::co_spawn(io_, accept_loop(acceptor_, false), asio::detached);
  if (!config_.tls_listen.empty()) {
    auto ctx = make_server_tls_context(config_);
    if (!ctx) return ctx.error();
    tls_ctx_ = std::move(*ctx);
    s = bind_listener(tls_acceptor_, config_.tls_listen, &tls_port_);
    if (!s) return s;
    asio::co_spawn(io_, accept_loop(tls_acceptor_, true), asio::detached);
    spdlog::info("TLS listener on {} (port {}), client certificates {}",
                 config_.tls_listen, tls_port_,
                 config_.tls_ca_file.empty() ? "not required" : "required");
  }
  if (!config_.metrics_listen.empty()) {
    s = bind_listener(metrics_acceptor_, config_.metrics_listen,
                      &metrics_port_);
    if (!s) return s;
    asio::co_spawn(io_, metrics_loop(metrics_acceptor_), asio::detached);
  }
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.async_wait([this](std::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    stop();
  });
  arm_deadline_timer();
  spdlog::info("batond listening on {} (port {}), fsync {}, auth {}",
               config_.listen, port_,
               config_.fsync == FsyncPolicy::always  ? "always"
               : config_.fsync == FsyncPolicy::batch ? "batch"
                                                     : "never",
               !config_.users.empty()        ? "users"
               : config_.requirepass.empty() ? "off"
                                             : "on");
  return {};
}

void Server::run() { io_.run(); }

void Server::stop() {
  asio::post(io_, [this] {
    if (stopping_) return;
    stopping_ = true;
    std::error_code ec;
    acceptor_.close(ec);
    metrics_acceptor_.close(ec);
    tls_acceptor_.close(ec);
    status_hub_->close_all();
    // Graceful: parked requests answered `unavailable`, nothing new runs,
    // staged replies go out as the journal makes them durable; then each
    // connection closes. Bounded: after kStopDrain whatever is left closes.
    for (auto c : std::set<std::shared_ptr<Connection>>(connections_)) {
      c->shut_down();
    }
    after_table_call();  // the withdrawn waiters' events; a sync if due
    auto timer = std::make_shared<asio::steady_timer>(io_);
    const auto until = std::chrono::steady_clock::now() + kStopDrain;
    auto poll = std::make_shared<std::function<void()>>();
    *poll = [this, timer, until, poll] {
      if (connections_.empty() || std::chrono::steady_clock::now() >= until) {
        finish_stop();
        *poll = nullptr;  // breaks the cycle
        return;
      }
      timer->expires_after(std::chrono::milliseconds(10));
      timer->async_wait([poll](std::error_code) {
        if (*poll) (*poll)();
      });
    };
    (*poll)();
  });
}

void Server::finish_stop() {
  // Shutting down gives nothing back: an acknowledged-or-not grant stays in
  // the journal and ends at its TTL after a restart, as before.
  for (auto c : std::set<std::shared_ptr<Connection>>(connections_)) {
    c->close(/*give_back_unsent=*/false);
  }
  // Waits for a sync in flight; its posted result is never run.
  if (journal_) (void)journal_->sync();
  signals_.cancel();
  io_.stop();
}

std::uint64_t Server::reply_seq() const {
  return journal_ ? journal_->appended_seq() : 0;
}

std::uint64_t Server::durable_seq() const {
  return journal_ ? journal_->durable_seq() : ~0ull;
}

bool Server::persistence_failed() const {
  return journal_ && journal_->failed();
}

core::Grant Server::to_grant(const core::CoreGrant& g) const {
  return core::to_grant(g, clock_->now(),
                        std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
}

void Server::after_table_call() {
  drain_events();
  arm_deadline_timer();
  persist();
  status_changed();
  if (!watches_.empty()) watches_changed();
}

void Server::drain_events() {
  if (draining_) return;
  draining_ = true;
  for (;;) {
    auto events = table_.take_events();
    if (events.empty()) break;
    for (const auto& e : events) handle_event(e);
  }
  draining_ = false;
}

void Server::handle_event(const core::Event& e) {
  using K = core::Event::Kind;
  if (e.kind == K::lease_expired) {
    ++stats_.expirations;
    return;
  }
  auto it = parked_.find({e.name, e.token});
  if (it != parked_.end()) {
    std::vector<Parked> who = std::move(it->second);
    parked_.erase(it);
    if (e.kind == K::granted && e.grant.token == e.token && clients_gone(who)) {
      // Every client waiting for this new lease had closed its connection
      // before batond read that (a stop, or the lock freed in the same
      // round as the close): give it back now instead of at its TTL.
      (void)table_.undo_grant(e.grant.name, e.grant.token);
      spdlog::info(
          "lock {}: the waiter's connection was closed before its grant "
          "could be sent; the lease was given back",
          core::quote_name(e.grant.name));
      for (const auto& p : who) {
        if (auto c = p.conn.lock()) c->close();
      }
      return;
    }
    std::string bytes;
    proto::RespWriter w(bytes);
    std::vector<std::pair<std::string, OwnerToken>> grants;
    if (e.kind == K::granted) {
      ++stats_.wait_grants;
      proto::write_grant(w, to_grant(e.grant));
      grants.emplace_back(e.grant.name, e.grant.token);
    } else if (e.kind == K::wait_timed_out) {
      ++stats_.wait_timeouts;
      w.error("timeout lock " + core::quote_name(e.name) +
              " was not granted within the wait time");
    } else {
      w.error("unavailable the waiting session ended");
    }
    // A new lease (not a reentrant join) is given back if its reply can
    // never be sent.
    const bool created = e.kind == K::granted && e.grant.token == e.token;
    for (const auto& p : who) {
      if (auto c = p.conn.lock()) {
        c->complete_parked(p.id, bytes, grants, created);
      }
    }
    return;
  }
  auto mit = parked_multi_.find(e.token);
  if (mit == parked_multi_.end()) return;
  if (e.kind == K::granted) {
    answer_multi(mit, false);
  } else {
    for (auto& pm : mit->second) {
      if (pm.timer) pm.timer->cancel();
      std::string bytes;
      if (e.kind == K::wait_timed_out) {
        ++stats_.wait_timeouts;
        proto::RespWriter(bytes).error(
            "timeout not every lock was granted within the wait time");
      } else {
        proto::RespWriter(bytes).error("unavailable the waiting session ended");
      }
      if (auto c = pm.who.conn.lock()) {
        c->complete_parked(pm.who.id, bytes, {}, false);
      }
    }
    parked_multi_.erase(mit);
  }
}

Result<core::MultiOutcome> Server::run_multi(
    const MultiPark& p, std::optional<core::Instant> deadline) {
  core::MultiRequest r;
  for (const auto& n : p.names) r.names.push_back(n);
  r.reservation = p.reservation;
  r.ttl = p.ttl;
  r.capacity = p.capacity;
  r.label = p.label;
  r.session = p.session;
  r.all_or_nothing = p.all_or_nothing;
  r.queue_deadline = deadline;
  return table_.acquire_multi(r);
}

// Re-asks the table for what the parked reservation holds and answers if
// that completes it (or unconditionally when final_answer).
void Server::answer_multi(
    std::map<OwnerToken, std::vector<ParkedMulti>>::iterator it,
    bool final_answer) {
  std::vector<ParkedMulti> keep;
  std::vector<ParkedMulti> all = std::move(it->second);
  parked_multi_.erase(it);
  for (auto& pm : all) {
    auto c = pm.who.conn.lock();
    if (!c || c->closed()) continue;
    const auto& p = pm.request;
    // acquire_some: refresh (queued requests stay ttl after this answer);
    // acquire_all: keep its deadline (a try would withdraw it).
    std::optional<core::Instant> deadline = clock_->now() + p.ttl;
    if (p.all_or_nothing) deadline = p.all_deadline;
    auto out = run_multi(p, deadline);
    std::string bytes;
    proto::RespWriter w(bytes);
    std::vector<std::pair<std::string, OwnerToken>> grants;
    if (!out) {
      proto::write_error(w, out.error());
    } else {
      bool done = final_answer || (p.all_or_nothing ? out->pending == 0
                                                    : !out->granted.empty());
      if (!done) {
        keep.push_back(std::move(pm));
        continue;
      }
      w.array(out->granted.size());
      for (const auto& g : out->granted) {
        proto::write_grant(w, to_grant(g));
        grants.emplace_back(g.name, g.token);
      }
      ++stats_.wait_grants;
    }
    if (pm.timer) pm.timer->cancel();
    c->complete_parked(pm.who.id, std::move(bytes), std::move(grants), false);
  }
  if (!keep.empty()) {
    auto& v = parked_multi_[keep.front().request.reservation];
    for (auto& k : keep) v.push_back(std::move(k));
  }
}

void Server::park_single(const std::string& name, const OwnerToken& token,
                         const std::shared_ptr<Connection>& c,
                         std::uint64_t id) {
  parked_[{name, token}].push_back(Parked{c, id});
}

void Server::park_multi(MultiPark request, std::chrono::milliseconds wait,
                        const std::shared_ptr<Connection>& c,
                        std::uint64_t id) {
  ParkedMulti pm;
  pm.who = Parked{c, id};
  OwnerToken key = request.reservation;
  bool some = !request.all_or_nothing;
  pm.request = std::move(request);
  if (some) {
    // acquire_some answers with what it holds when its wait ends.
    pm.timer = std::make_shared<asio::steady_timer>(io_, wait);
    pm.timer->async_wait([this, key, id](std::error_code ec) {
      if (ec) return;
      auto it = parked_multi_.find(key);
      if (it == parked_multi_.end()) return;
      // Answer only the parked call this timer belongs to.
      std::vector<ParkedMulti> others;
      std::vector<ParkedMulti> mine;
      for (auto& pm2 : it->second) {
        (pm2.who.id == id && pm2.timer ? mine : others)
            .push_back(std::move(pm2));
      }
      it->second = std::move(mine);
      answer_multi(it, true);
      if (!others.empty()) {
        auto& v = parked_multi_[key];
        for (auto& o : others) v.push_back(std::move(o));
      }
      after_table_call();
    });
  }
  parked_multi_[key].push_back(std::move(pm));
}

void Server::withdrawn(const std::string& name, const OwnerToken& token) {
  std::string bytes;
  // not_acquired, not timeout: the wait did not run out (a client that
  // waits "forever" re-asks after a timeout, but must stop here).
  proto::RespWriter(bytes).error(
      "not_acquired the waiting request was withdrawn by LOCK.RELEASE");
  if (auto it = parked_.find({name, token}); it != parked_.end()) {
    auto who = std::move(it->second);
    parked_.erase(it);
    for (const auto& p : who) {
      if (auto c = p.conn.lock()) c->complete_parked(p.id, bytes, {}, false);
    }
    return;
  }
  // An ACQUIRE_ALL parked under this reservation: the release withdrew the
  // whole reservation, and no table event will ever answer it. (A parked
  // ACQUIRE_SOME keeps waiting for its other names and its timer.)
  auto mit = parked_multi_.find(token);
  if (mit == parked_multi_.end()) return;
  std::vector<ParkedMulti> all = std::move(mit->second);
  parked_multi_.erase(mit);
  std::vector<ParkedMulti> keep;
  for (auto& pm : all) {
    if (!pm.request.all_or_nothing) {
      keep.push_back(std::move(pm));
    } else if (auto c = pm.who.conn.lock()) {
      c->complete_parked(pm.who.id, bytes, {}, false);
    }
  }
  if (!keep.empty()) {
    auto& v = parked_multi_[token];
    for (auto& k : keep) v.push_back(std::move(k));
  }
}

bool Server::clients_gone(const std::vector<Parked>& who) {
  for (const auto& p : who) {
    auto c = p.conn.lock();
    if (c && !c->peer_closed()) return false;
  }
  return true;
}

bool Server::grant_staged_elsewhere(const Connection* except,
                                    std::string_view name,
                                    const OwnerToken& token) const {
  for (const auto& c : connections_) {
    if (c.get() != except && c->has_staged() && !c->closed() &&
        c->stages_grant(name, token)) {
      return true;
    }
  }
  return false;
}

void Server::connection_closed(const std::shared_ptr<Connection>& c,
                               bool had_ephemeral) {
  const core::SessionId sid = c->session();
  table_.end_session(sid);
  if (had_ephemeral) {
    auto timer =
        std::make_shared<asio::steady_timer>(io_, config_.session_timeout);
    ephemeral_[sid] = timer;
    timer->async_wait([this, sid](std::error_code ec) {
      if (ec) return;
      history_sink_.set_losing(true);
      std::size_t n = table_.release_session_leases(sid);
      history_sink_.set_losing(false);
      ephemeral_.erase(sid);
      if (n > 0) spdlog::info("session {}: freed {} ephemeral leases", sid, n);
      after_table_call();
    });
  }
  // Erase after the current handler: `c` may be the caller's own object.
  asio::post(io_, [this, c] {
    connections_.erase(c);
    staged_.erase(c);
  });
  after_table_call();
}

// One server-wide timer, re-armed only when the earliest deadline moves
// earlier than the instant it is armed for (a new lease usually expires
// after the earliest one, so most requests touch no timer). When it fires
// early (the lease was released or extended) advance() finds nothing due
// and the timer is armed again for the then-earliest deadline.
void Server::arm_deadline_timer() {
  auto next = table_.next_deadline();
  if (!next) return;  // an armed timer fires once, harmlessly
  if (armed_ && *armed_ <= *next) return;
  armed_ = next;
  deadline_timer_.expires_at(*next);  // the table reads the steady clock
  deadline_timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    armed_.reset();
    table_.advance();
    after_table_call();
  });
}

void Server::stage_pending(const std::shared_ptr<Connection>& c) {
  staged_.insert(c);
  if (release_posted_) return;
  release_posted_ = true;
  asio::post(io_, [this] {
    release_posted_ = false;
    release_staged();
  });
}

// Group commit (docs/server.md, "Durability"): records are written on this
// thread after every table call; one fdatasync at a time runs on the
// journal's sync thread, started as soon as something written is not durable
// and none is in flight, but not sooner than the interval after the previous
// one started. Its result comes back here (on_sync_done), releases the replies
// it covers and starts the next one for what was appended meanwhile.
void Server::persist() {
  if (!journal_) return;
  if (journal_->appended_seq() != journal_->durable_seq() &&
      !journal_->failed()) {
    Status s = journal_->write();
    if (!s) spdlog::error("{}", s.error().message());
    if (journal_->policy() == FsyncPolicy::never) {
      (void)journal_->maybe_compact(table_);
    } else {
      maybe_start_sync();
    }
  }
  release_staged();
}

std::chrono::milliseconds Server::sync_interval() const {
  return config_.fsync == FsyncPolicy::batch ? config_.fsync_interval
                                             : std::chrono::milliseconds(0);
}

void Server::maybe_start_sync() {
  if (!journal_ || journal_->sync_in_flight() || journal_->failed() ||
      journal_->written_seq() == journal_->durable_seq()) {
    return;
  }
  auto now = std::chrono::steady_clock::now();
  auto earliest = last_sync_start_ + sync_interval();
  if (now < earliest) {
    if (!batch_armed_) {
      batch_armed_ = true;
      batch_timer_.expires_at(earliest);
      batch_timer_.async_wait([this](std::error_code ec) {
        batch_armed_ = false;
        if (!ec) maybe_start_sync();
      });
    }
    return;
  }
  bool started = journal_->start_sync([this](const SyncResult& r) {
    asio::post(io_, [this, r] { on_sync_done(r); });
  });
  if (started) last_sync_start_ = now;
}

void Server::on_sync_done(const SyncResult& result) {
  Status s = journal_->finish_sync(result);
  if (!s) spdlog::error("{}", s.error().message());
  (void)journal_->maybe_compact(table_);
  release_staged();
  maybe_start_sync();
}

void Server::release_staged() {
  const std::uint64_t durable = journal_ ? journal_->durable_seq() : ~0ull;
  const bool failed = persistence_failed();
  const std::string failure = failed ? journal_->failure() : std::string();
  auto conns = std::move(staged_);
  staged_.clear();
  for (const auto& c : conns) {
    c->release(durable, failed, failure);
    if (c->has_staged() && !c->closed()) staged_.insert(c);
  }
  if (failed) {
    drain_events();
    status_changed();  // grants undone above
  }
}

}  // namespace baton::server
