// The batond command handlers (see docs/protocol.md). Each decodes its
// request with proto/commands.h, checks it with core's validation (the
// client's own checks), makes one LockTable call and stages one reply;
// every rule is the table's.
#include "proto/commands.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include "core/request.h"
#include "core/validate.h"
#include "server/connection.h"

namespace baton::server {

namespace {

// Case-insensitive equality of a request word and a name (no copy: this
// runs for every request and option).
bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool is_mutating(std::string_view cmd) {
  return cmd == "LOCK.ACQUIRE" || cmd == "LOCK.EXTEND" ||
         cmd == "LOCK.RELEASE" || cmd == "LOCK.ACQUIRE_SOME" ||
         cmd == "LOCK.ACQUIRE_ALL" || cmd == "COUNTER.ADD" ||
         cmd == "COUNTER.TAKE";
}

struct Arity {
  const char* name;
  std::size_t min, max;  // argument counts including the command
};
constexpr Arity kArity[] = {
    {"PING", 1, 2},
    {"AUTH", 2, 3},
    {"HELLO", 1, 8},
    {"INFO", 1, 2},
    {"QUIT", 1, 1},
    {"LOCK.ACQUIRE", 4, 15},
    {"LOCK.EXTEND", 4, 4},
    {"LOCK.RELEASE", 3, 3},
    {"LOCK.DESCRIBE", 2, 2},
    {"LOCK.LIST", 3, 3},
    {"LOCK.WATCH", 3, 3},
    {"LOCK.HISTORY", 2, 2},
    {"LOCK.ACQUIRE_SOME", 7, SIZE_MAX},
    {"LOCK.ACQUIRE_ALL", 7, SIZE_MAX},
    {"COUNTER.GET", 2, 2},
    {"COUNTER.ADD", 3, 3},
    {"COUNTER.TAKE", 3, 3},
};

}  // namespace

void Connection::reply_result_error(const Error& e) {
  ++server_.stats().errors;
  std::string out;
  proto::RespWriter w(out);
  if (e.code() == Errc::not_acquired) {
    proto::write_not_acquired(w, e);
  } else {
    proto::write_error(w, e);
  }
  reply(std::move(out));
}

void Connection::execute(const proto::Request& req) {
  const Arity* arity = nullptr;
  for (const auto& a : kArity) {
    if (iequals(req[0], a.name)) {
      arity = &a;
      break;
    }
  }
  if (arity == nullptr) {
    return reply_error(Errc::invalid_argument, "unknown command " +
                                                   core::quote_name(req[0]) +
                                                   " (see docs/protocol.md)");
  }
  const std::string_view cmd = arity->name;  // upper case
  if (req.size() < arity->min || req.size() > arity->max) {
    return reply_error(Errc::invalid_argument,
                       "wrong number of arguments for " + std::string(cmd));
  }
  if (cmd == "AUTH") return cmd_auth(req);
  if (cmd == "QUIT") {
    std::string out;
    proto::RespWriter(out).simple("OK");
    reply(std::move(out));
    close_after_flush_ = true;
    pending_.clear();
    return;
  }
  if (!authed_) {
    return reply_error(Errc::permission_denied,
                       server_.config().users.empty()
                           ? "authentication required (AUTH password)"
                           : "authentication required (AUTH user password)");
  }
  if (user_ != nullptr && !permitted(cmd, req)) return;
  if (is_mutating(cmd) && server_.persistence_failed()) {
    ++server_.stats().refused_unavailable;
    return reply_error(Errc::unavailable,
                       "persistence failed; batond refuses changes until it "
                       "is restarted");
  }
  if (cmd == "PING") {
    std::string out;
    proto::RespWriter w(out);
    if (req.size() == 2) {
      w.bulk(req[1]);
    } else {
      w.simple("PONG");
    }
    return reply(std::move(out));
  }
  if (cmd == "HELLO") return cmd_hello(req);
  if (cmd == "INFO") {
    std::string out;
    proto::RespWriter(out).bulk(server_.info_text());
    return reply(std::move(out));
  }
  if (cmd == "LOCK.ACQUIRE") return cmd_acquire(req);
  if (cmd == "LOCK.EXTEND") return cmd_extend(req);
  if (cmd == "LOCK.RELEASE") return cmd_release(req);
  if (cmd == "LOCK.DESCRIBE") return cmd_describe(req);
  if (cmd == "LOCK.LIST") return cmd_list(req);
  if (cmd == "LOCK.WATCH") return cmd_watch(req);
  if (cmd == "LOCK.HISTORY") return cmd_history(req);
  if (cmd == "LOCK.ACQUIRE_SOME" || cmd == "LOCK.ACQUIRE_ALL") {
    return cmd_multi(req);
  }
  return cmd_counter(req);
}

void Connection::cmd_auth(const proto::Request& req) {
  const ServerConfig& config = server_.config();
  const std::string& given = req.back();
  if (req.size() == 3) {
    // AUTH user password (Redis 6).
    const User* found =
        authenticate(config.users, server_.auth_cache(), req[1], given);
    if (found == nullptr) return auth_failed("invalid user name or password");
    authed_ = true;
    user_ = found;
  } else {
    const std::string& want = config.requirepass;
    if (want.empty()) {
      return reply_error(
          Errc::invalid_argument,
          config.users.empty()
              ? "AUTH called but no password is configured"
              : "AUTH needs a user name here: AUTH user password");
    }
    if (!equal_constant_time(given, want)) {
      return auth_failed("invalid password");
    }
    authed_ = true;
    user_ = nullptr;
  }
  std::string out;
  proto::RespWriter(out).simple("OK");
  reply(std::move(out));
}

void Connection::auth_failed(std::string message) {
  authed_ = false;
  user_ = nullptr;
  ++server_.stats().auth_failures;
  ++server_.stats().errors;
  std::string bytes;
  proto::RespWriter w(bytes);
  proto::write_error(w, Error(Errc::permission_denied, std::move(message)));
  const auto delay = server_.config().auth_fail_delay;
  if (delay.count() <= 0) return reply(std::move(bytes));
  // Parked like a blocking request: later requests (more guesses) wait.
  parked_ = true;
  const std::uint64_t id = ++park_id_;
  auto timer =
      std::make_shared<asio::steady_timer>(socket_.get_executor(), delay);
  timer->async_wait([self = shared_from_this(), timer, id,
                     bytes = std::move(bytes)](std::error_code) mutable {
    self->complete_parked(id, std::move(bytes), {}, false);
  });
}

bool Connection::permitted(std::string_view cmd, const proto::Request& req) {
  unsigned need = 0;
  std::vector<std::string_view> names;
  if (cmd == "PING" || cmd == "HELLO") return true;
  if (cmd == "INFO") {
    need = kAdmin;
    names.push_back("");
  } else if (cmd == "LOCK.LIST" || cmd == "LOCK.WATCH") {
    // A watch is authorized as a listing of its prefix: it tells only that
    // something may have changed, and the watcher then reads LOCK.LIST.
    if (may_list(*user_, req[1])) return true;  // filtered in cmd_list
    need = kRead;
    names.push_back(req[1]);
  } else if (cmd == "LOCK.DESCRIBE" || cmd == "LOCK.HISTORY") {
    need = kRead;
    names.push_back(req[1]);
  } else if (cmd == "LOCK.ACQUIRE_SOME" || cmd == "LOCK.ACQUIRE_ALL") {
    need = kLock;
    for (std::size_t i = 6; i < req.size(); ++i) names.push_back(req[i]);
  } else if (cmd.rfind("LOCK.", 0) == 0) {
    need = kLock;
    names.push_back(req[1]);
  } else {
    need = kCounter;  // COUNTER.*
    names.push_back(req[1]);
  }
  for (std::string_view n : names) {
    if ((perms_on(*user_, n) & need) != 0) continue;
    ++server_.stats().permission_denied;
    spdlog::info("session {}: user {} refused {} on {}", session_,
                 core::quote_name(user_->name), cmd, core::quote_name(n));
    reply_error(Errc::permission_denied,
                "user " + core::quote_name(user_->name) + " may not run " +
                    std::string(cmd) + " on " + core::quote_name(n) + ": no " +
                    perm_name(need) + " permission for that prefix (rules: " +
                    describe_rules(*user_) + ")");
    return false;
  }
  return true;
}

void Connection::cmd_hello(const proto::Request& req) {
  if (req.size() >= 2 && req[1] != "2") {
    return reply_error(Errc::invalid_argument,
                       "only RESP2 is supported (HELLO 2)");
  }
  std::string out;
  proto::RespWriter w(out);
  w.array(8);
  w.bulk("server");
  w.bulk("batond");
  w.bulk("version");
  w.bulk("0.1.0");
  w.bulk("proto");
  w.integer(2);
  w.bulk("session");
  w.integer(static_cast<std::int64_t>(session_));
  reply(std::move(out));
}

void Connection::cmd_acquire(const proto::Request& req) {
  auto c = proto::decode_acquire(req);
  if (!c) return reply_result_error(c.error());
  const AcquireSpec& spec = c->spec;
  if (Status st = core::validate(spec, c->wait); !st.ok()) {
    return reply_result_error(st.error());
  }
  core::AcquireRequest r;
  r.name = spec.name;
  r.token = spec.token;
  r.ttl = spec.ttl;
  r.capacity = spec.capacity;
  r.label = spec.label;
  r.reentrancy_key = spec.reentrancy_key;
  r.shared = spec.shared;
  r.ephemeral = c->ephemeral;
  r.session = session_;
  if (c->wait.count() > 0) r.wait_deadline = server_.clock().now() + c->wait;
  auto out = server_.table().acquire(r);
  if (r.ephemeral && out) had_ephemeral_ = true;
  if (!out) {
    reply_result_error(out.error());
  } else if (out->granted) {
    std::string bytes;
    proto::RespWriter w(bytes);
    const core::Grant g = server_.to_grant(out->grant);
    if (c->brief && proto::brief_fits(g, spec)) {
      proto::write_brief_grant(w, g);
    } else {
      proto::write_grant(w, g);
    }
    // The grant to undo if persisting it fails, or to give back if the
    // connection closes before the reply is written (only with a journal:
    // without one, nothing is staged).
    std::vector<std::pair<std::string, OwnerToken>> grants;
    if (server_.has_journal()) {
      grants.emplace_back(std::move(out->grant.name), out->grant.token);
    }
    reply(std::move(bytes), std::move(grants), /*durable=*/true, out->created);
  } else {
    ++server_.stats().waits;
    if (c->queued) {
      // The interim answer of a request that waits (docs/protocol.md,
      // QUEUED): its client learns the wait started without a try first.
      // Not durable: a waiting request is not journaled.
      std::string bytes;
      proto::RespWriter w(bytes);
      proto::write_queued(w, out->position);
      reply(std::move(bytes), {}, /*durable=*/false);
    }
    parked_ = true;
    ++park_id_;
    server_.park_single(spec.name, spec.token, shared_from_this(), park_id_);
  }
  server_.after_table_call();
}

void Connection::cmd_extend(const proto::Request& req) {
  auto c = proto::decode_extend(req);
  if (!c) return reply_result_error(c.error());
  if (Status st = core::validate_lease_call(c->name, c->token, c->ttl);
      !st.ok()) {
    return reply_result_error(st.error());
  }
  auto g = server_.table().extend(c->name, c->token, c->ttl);
  if (!g) {
    reply_result_error(g.error());
  } else {
    std::string bytes;
    proto::RespWriter w(bytes);
    proto::write_grant(w, server_.to_grant(*g));
    reply(std::move(bytes));
  }
  server_.after_table_call();
}

void Connection::cmd_release(const proto::Request& req) {
  auto c = proto::decode_release(req);
  if (!c) return reply_result_error(c.error());
  if (Status st = core::validate_lease_call(c->name, c->token); !st.ok()) {
    return reply_result_error(st.error());
  }
  auto r = server_.table().release(c->name, c->token);
  if (!r) {
    reply_result_error(r.error());
  } else {
    std::string bytes;
    proto::RespWriter w(bytes);
    proto::write_release(w, core::ReleaseResult{r->was_held, r->holds_left});
    // Acknowledged before it is durable: if a crash loses the release, the
    // lease comes back and ends at its TTL (the safe direction). The journal
    // keeps its order, so a grant that follows it is durable only with it.
    reply(std::move(bytes), {}, /*durable=*/false);
    if (r->withdrew_waiter) server_.withdrawn(c->name, c->token);
  }
  server_.after_table_call();
}

void Connection::cmd_describe(const proto::Request& req) {
  auto name = proto::decode_describe(req);
  if (!name) return reply_result_error(name.error());
  if (Status st = core::validate_name(*name); !st.ok()) {
    return reply_result_error(st.error());
  }
  auto info = server_.table().describe(*name);
  if (!info) {
    reply_result_error(info.error());
  } else {
    std::string bytes;
    proto::RespWriter w(bytes);
    proto::write_lock_info(w, *info);
    reply(std::move(bytes));
  }
  server_.after_table_call();
}

void Connection::cmd_history(const proto::Request& req) {
  auto name = proto::decode_history(req);
  if (!name) return reply_result_error(name.error());
  if (Status st = core::validate_name(*name); !st.ok()) {
    return reply_result_error(st.error());
  }
  server_.table().advance();  // expiries due now are in the history
  server_.after_table_call();
  // permitted() checked read on the name: the one lock is visible.
  statuspage::Query q;
  q.lock = *name;
  q.has_lock = true;
  std::string bytes;
  proto::RespWriter(bytes).bulk(
      server_.history_.json(q, statuspage::wall_ms(), nullptr));
  reply(std::move(bytes), {}, /*durable=*/false);
}

void Connection::cmd_list(const proto::Request& req) {
  auto c = proto::decode_list(req);
  if (!c) return reply_result_error(c.error());
  if (Status st = core::validate_prefix(c->prefix); !st.ok()) {
    return reply_result_error(st.error());
  }
  const std::string& prefix = c->prefix;
  const std::size_t limit = c->limit;
  std::vector<LockInfo> infos;
  if (user_ == nullptr) {
    infos = server_.table().list(prefix, limit);
  } else {
    // Only the locks this user may read (a prefix wider than its rules).
    for (auto& i : server_.table().list(prefix, 100'000)) {
      if (infos.size() >= limit) break;
      if ((perms_on(*user_, i.name) & kRead) != 0) {
        infos.push_back(std::move(i));
      }
    }
  }
  std::string bytes;
  proto::RespWriter w(bytes);
  w.array(infos.size());
  for (const auto& i : infos) proto::write_lock_info(w, i);
  reply(std::move(bytes));
  server_.after_table_call();
}

void Connection::cmd_multi(const proto::Request& req) {
  auto c = proto::decode_multi(req);
  if (!c) return reply_result_error(c.error());
  if (Status st = core::validate(c->spec, c->wait); !st.ok()) {
    return reply_result_error(st.error());
  }
  const bool all = c->spec.all_or_nothing;
  Server::MultiPark p;
  p.reservation = c->spec.reservation;
  p.ttl = c->spec.ttl;
  p.capacity = c->spec.capacity;
  p.label = std::move(c->spec.label);
  p.all_or_nothing = all;
  p.session = session_;
  p.names = std::move(c->spec.names);
  const auto now = server_.clock().now();
  const auto wait_d = c->wait;
  std::optional<core::Instant> deadline;
  if (all) {
    if (wait_d.count() > 0) deadline = now + wait_d;
  } else {
    // Not-yet-granted requests stay queued ttl after this call returns.
    deadline = now + wait_d + p.ttl;
  }
  p.all_deadline = deadline;
  auto out = server_.run_multi(p, deadline);
  if (!out) {
    reply_result_error(out.error());
  } else if ((all && out->pending == 0 && !out->granted.empty()) ||
             (!all && (!out->granted.empty() || wait_d.count() == 0 ||
                       out->pending == 0))) {
    std::string bytes;
    proto::RespWriter w(bytes);
    std::vector<std::pair<std::string, OwnerToken>> grants;
    w.array(out->granted.size());
    for (const auto& g : out->granted) {
      proto::write_grant(w, server_.to_grant(g));
      grants.emplace_back(g.name, g.token);
    }
    reply(std::move(bytes), std::move(grants));
  } else if (all && wait_d.count() == 0) {
    reply_result_error(Error(Errc::not_acquired,
                             "not every lock is free; nothing was acquired"));
  } else {
    ++server_.stats().waits;
    parked_ = true;
    ++park_id_;
    server_.park_multi(std::move(p), wait_d, shared_from_this(), park_id_);
  }
  server_.after_table_call();
}

void Connection::cmd_counter(const proto::Request& req) {
  using Op = proto::CounterCommand::Op;
  auto c = proto::decode_counter(req);
  if (!c) return reply_result_error(c.error());
  if (Status st = core::validate_name(c->name, "counter name"); !st.ok()) {
    return reply_result_error(st.error());
  }
  core::LockTable& table = server_.table();
  Result<std::int64_t> v = c->op == Op::get ? table.counter_get(c->name)
                           : c->op == Op::add
                               ? table.counter_add(c->name, c->n)
                               : table.counter_take(c->name, c->n);
  if (!v) {
    reply_result_error(v.error());
  } else {
    std::string bytes;
    proto::RespWriter(bytes).integer(*v);
    reply(std::move(bytes));
  }
  server_.after_table_call();
}

}  // namespace baton::server
