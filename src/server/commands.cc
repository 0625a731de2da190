// The batond command handlers (see docs/protocol.md). Each parses its
// arguments, makes one LockTable call and stages one reply; every rule is
// the table's.
#include "proto/commands.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>

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

bool parse_int(std::string_view s, std::int64_t* v) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

Error bad(std::string m) { return Error(Errc::invalid_argument, std::move(m)); }

Result<std::int64_t> int_arg(std::string_view s, std::string_view what,
                             std::int64_t min, std::int64_t max) {
  std::int64_t v = 0;
  if (!parse_int(s, &v)) {
    return bad(std::string(what) + " must be an integer, got " +
               core::quote_name(s));
  }
  if (v < min || v > max) {
    return bad(std::string(what) + " " + std::to_string(v) +
               " is out of range (" + std::to_string(min) + ".." +
               std::to_string(max) + ")");
  }
  return v;
}

// ttl_ms: any out-of-range value, also one beyond int64, reports the
// accepted range in the words of core::validate_ttl.
Result<std::int64_t> ttl_arg(std::string_view s) {
  std::int64_t v = 0;
  if (!s.empty()) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range && p == s.data() + s.size()) {
      return core::ttl_out_of_range(std::string(s) + "ms");
    }
  }
  if (!parse_int(s, &v)) {
    return bad("ttl_ms must be an integer, got " + core::quote_name(s));
  }
  if (Status st = core::validate_ttl_ms(v); !st.ok()) {
    return std::move(st).error();
  }
  return v;
}

Result<OwnerToken> token_arg(std::string_view s) {
  auto t = OwnerToken::parse(s);
  if (!t) return bad("owner token must be 32 hex digits");
  if (t->is_zero()) return bad("owner token must not be zero");
  return *t;
}

constexpr std::int64_t kMaxMs = 7LL * 24 * 3600 * 1000;
constexpr std::int64_t kMaxU32 = 0xFFFFFFFFLL;

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
  if (cmd == "LOCK.ACQUIRE_SOME") return cmd_multi(req, false);
  if (cmd == "LOCK.ACQUIRE_ALL") return cmd_multi(req, true);
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
  } else if (cmd == "LOCK.LIST") {
    if (may_list(*user_, req[1])) return true;  // filtered in cmd_list
    need = kRead;
    names.push_back(req[1]);
  } else if (cmd == "LOCK.DESCRIBE") {
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
  auto token = token_arg(req[2]);
  if (!token) return reply_result_error(token.error());
  auto ttl = ttl_arg(req[3]);
  if (!ttl) return reply_result_error(ttl.error());
  core::AcquireRequest r;
  r.name = req[1];
  r.token = *token;
  r.ttl = std::chrono::milliseconds(*ttl);
  r.session = session_;
  std::int64_t wait_ms = 0;
  bool brief = false;
  for (std::size_t i = 4; i < req.size(); ++i) {
    const std::string_view opt = req[i];
    bool has_value = i + 1 < req.size();
    if (iequals(opt, "EPHEMERAL")) {
      r.ephemeral = true;
    } else if (iequals(opt, "BRIEF")) {
      brief = true;
    } else if (iequals(opt, "SHARED")) {
      r.shared = true;
    } else if (iequals(opt, "WAIT") && has_value) {
      auto w = int_arg(req[++i], "WAIT", 0, kMaxMs);
      if (!w) return reply_result_error(w.error());
      wait_ms = *w;
    } else if (iequals(opt, "CAPACITY") && has_value) {
      auto c = int_arg(req[++i], "CAPACITY", 1, kMaxU32);
      if (!c) return reply_result_error(c.error());
      r.capacity = static_cast<std::uint32_t>(*c);
    } else if (iequals(opt, "LABEL") && has_value) {
      r.label = req[++i];
    } else if (iequals(opt, "REENTRANT") && has_value) {
      r.reentrancy_key = req[++i];
    } else {
      return reply_error(Errc::invalid_argument,
                         "unknown or incomplete LOCK.ACQUIRE option " +
                             core::quote_name(req[i]));
    }
  }
  if (wait_ms > 0) {
    r.wait_deadline =
        server_.clock().now() + std::chrono::milliseconds(wait_ms);
  }
  auto out = server_.table().acquire(r);
  if (r.ephemeral && out) had_ephemeral_ = true;
  if (!out) {
    reply_result_error(out.error());
  } else if (out->granted) {
    std::string bytes;
    proto::RespWriter w(bytes);
    const core::Grant g = server_.to_grant(out->grant);
    core::Grant asked;
    asked.token = r.token;
    asked.ttl = std::chrono::duration_cast<std::chrono::milliseconds>(r.ttl);
    asked.capacity = r.capacity;
    asked.shared = r.shared;
    if (brief && proto::brief_fits(g, asked)) {
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
    parked_ = true;
    ++park_id_;
    server_.park_single(std::string(r.name), r.token, shared_from_this(),
                        park_id_);
  }
  server_.after_table_call();
}

void Connection::cmd_extend(const proto::Request& req) {
  auto token = token_arg(req[2]);
  if (!token) return reply_result_error(token.error());
  auto ttl = ttl_arg(req[3]);
  if (!ttl) return reply_result_error(ttl.error());
  auto g =
      server_.table().extend(req[1], *token, std::chrono::milliseconds(*ttl));
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
  auto token = token_arg(req[2]);
  if (!token) return reply_result_error(token.error());
  auto r = server_.table().release(req[1], *token);
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
    if (r->withdrew_waiter) server_.withdrawn(req[1], *token);
  }
  server_.after_table_call();
}

void Connection::cmd_describe(const proto::Request& req) {
  auto info = server_.table().describe(req[1]);
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

void Connection::cmd_list(const proto::Request& req) {
  auto limit = int_arg(req[2], "limit", 0, 100'000);
  if (!limit) return reply_result_error(limit.error());
  std::vector<LockInfo> infos;
  if (user_ == nullptr) {
    infos = server_.table().list(req[1], static_cast<std::size_t>(*limit));
  } else {
    // Only the locks this user may read (a prefix wider than its rules).
    for (auto& i : server_.table().list(req[1], 100'000)) {
      if (infos.size() >= static_cast<std::size_t>(*limit)) break;
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

// LOCK.ACQUIRE_SOME|ALL token ttl_ms wait_ms capacity label name...
void Connection::cmd_multi(const proto::Request& req, bool all) {
  auto token = token_arg(req[1]);
  if (!token) return reply_result_error(token.error());
  auto ttl = ttl_arg(req[2]);
  if (!ttl) return reply_result_error(ttl.error());
  auto wait = int_arg(req[3], "wait_ms", 0, kMaxMs);
  if (!wait) return reply_result_error(wait.error());
  auto cap = int_arg(req[4], "capacity", 1, kMaxU32);
  if (!cap) return reply_result_error(cap.error());
  Server::MultiPark p;
  p.reservation = *token;
  p.ttl = std::chrono::milliseconds(*ttl);
  p.capacity = static_cast<std::uint32_t>(*cap);
  p.label = req[5];
  p.all_or_nothing = all;
  p.session = session_;
  p.names.assign(req.begin() + 6, req.end());
  const auto now = server_.clock().now();
  const auto wait_d = std::chrono::milliseconds(*wait);
  std::optional<core::Instant> deadline;
  if (all) {
    if (*wait > 0) deadline = now + wait_d;
  } else {
    // Not-yet-granted requests stay queued ttl after this call returns.
    deadline = now + wait_d + p.ttl;
  }
  p.all_deadline = deadline;
  auto out = server_.run_multi(p, deadline);
  if (!out) {
    reply_result_error(out.error());
  } else if ((all && out->pending == 0 && !out->granted.empty()) ||
             (!all &&
              (!out->granted.empty() || *wait == 0 || out->pending == 0))) {
    std::string bytes;
    proto::RespWriter w(bytes);
    std::vector<std::pair<std::string, OwnerToken>> grants;
    w.array(out->granted.size());
    for (const auto& g : out->granted) {
      proto::write_grant(w, server_.to_grant(g));
      grants.emplace_back(g.name, g.token);
    }
    reply(std::move(bytes), std::move(grants));
  } else if (all && *wait == 0) {
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
  const std::string_view cmd = req[0];
  Result<std::int64_t> v = std::int64_t{0};
  if (iequals(cmd, "COUNTER.GET")) {
    v = server_.table().counter_get(req[1]);
  } else {
    std::int64_t n = 0;
    if (!parse_int(req[2], &n)) {
      return reply_error(Errc::invalid_argument,
                         "counter argument must be an integer");
    }
    v = iequals(cmd, "COUNTER.ADD") ? server_.table().counter_add(req[1], n)
                                    : server_.table().counter_take(req[1], n);
  }
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
