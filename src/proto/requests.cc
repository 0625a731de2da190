// proto/requests.cc — the request half of proto/commands.h: LOCK.* and
// COUNTER.* written by the baton:// store and read by batond.
#include <strings.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/validate.h"
#include "proto/commands.h"

namespace baton::proto {
namespace {

constexpr std::int64_t kMaxMs = 7LL * 24 * 3600 * 1000;
constexpr std::int64_t kMaxU32 = 0xFFFFFFFFLL;
constexpr std::int64_t kMaxListLimit = 100'000;

// A number as a bulk string, without a temporary std::string.
void bulk_number(RespWriter& w, std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  w.bulk(std::string_view(buf, static_cast<std::size_t>(end - buf)));
}

void bulk_token(RespWriter& w, const OwnerToken& t) { w.bulk(t.to_string()); }

// Case-insensitive equality of a request word and a name.
bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool parse_int(std::string_view s, std::int64_t* v) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

Error invalid_field(std::string m) {
  return Error(Errc::invalid_argument, std::move(m));
}

Status arity(const Request& req, std::size_t min, std::size_t max,
             std::string_view cmd) {
  if (req.size() < min || req.size() > max) {
    return invalid_field("wrong number of arguments for " + std::string(cmd));
  }
  return {};
}

Result<std::int64_t> int_arg(std::string_view s, std::string_view what,
                             std::int64_t min, std::int64_t max) {
  std::int64_t v = 0;
  if (!parse_int(s, &v)) {
    return invalid_field(std::string(what) + " must be an integer, got " +
                         core::quote_name(s));
  }
  if (v < min || v > max) {
    return invalid_field(std::string(what) + " " + std::to_string(v) +
                         " is out of range (" + std::to_string(min) + ".." +
                         std::to_string(max) + ")");
  }
  return v;
}

// ttl_ms: any out-of-range value, also one beyond int64, reports the
// accepted range in the words of core::validate_ttl.
Result<milliseconds> ttl_arg(std::string_view s) {
  std::int64_t v = 0;
  if (!s.empty()) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range && p == s.data() + s.size()) {
      return core::ttl_out_of_range(std::string(s) + "ms");
    }
  }
  if (!parse_int(s, &v)) {
    return invalid_field("ttl_ms must be an integer, got " +
                         core::quote_name(s));
  }
  if (Status st = core::validate_ttl_ms(v); !st.ok()) {
    return std::move(st).error();
  }
  return milliseconds(v);
}

Result<OwnerToken> token_arg(std::string_view s) {
  auto t = OwnerToken::parse(s);
  if (!t) return invalid_field("owner token must be 32 hex digits");
  if (t->is_zero()) return invalid_field("owner token must not be zero");
  return *t;
}

// The options after LOCK.ACQUIRE's fixed arguments.
Status acquire_options(const Request& req, AcquireCommand* c) {
  for (std::size_t i = 4; i < req.size(); ++i) {
    const std::string_view opt = req[i];
    const bool has_value = i + 1 < req.size();
    if (iequals(opt, "EPHEMERAL")) {
      c->ephemeral = true;
    } else if (iequals(opt, "BRIEF")) {
      c->brief = true;
    } else if (iequals(opt, "QUEUED")) {
      c->queued = true;
    } else if (iequals(opt, "SHARED")) {
      c->spec.shared = true;
    } else if (iequals(opt, "WAIT") && has_value) {
      auto w = int_arg(req[++i], "WAIT", 0, kMaxMs);
      if (!w) return w.error();
      c->wait = milliseconds(*w);
    } else if (iequals(opt, "CAPACITY") && has_value) {
      auto n = int_arg(req[++i], "CAPACITY", 1, kMaxU32);
      if (!n) return n.error();
      c->spec.capacity = static_cast<std::uint32_t>(*n);
    } else if (iequals(opt, "LABEL") && has_value) {
      c->spec.label = req[++i];
    } else if (iequals(opt, "REENTRANT") && has_value) {
      c->spec.reentrancy_key = req[++i];
    } else {
      return invalid_field("unknown or incomplete LOCK.ACQUIRE option " +
                           core::quote_name(req[i]));
    }
  }
  return {};
}

}  // namespace

// --- encoding ----------------------------------------------------------------

void encode_acquire(RespWriter& w, const AcquireSpec& spec, milliseconds wait,
                    bool brief, bool queued) {
  const bool waits = wait.count() > 0;
  queued = queued && waits;
  w.array(4 + (waits ? 2 : 0) + (spec.capacity != 1 ? 2 : 0) +
          (spec.label.empty() ? 0 : 2) + (spec.reentrancy_key.empty() ? 0 : 2) +
          (spec.shared ? 1 : 0) + (brief ? 1 : 0) + (queued ? 1 : 0));
  w.bulk("LOCK.ACQUIRE");
  w.bulk(spec.name);
  bulk_token(w, spec.token);
  bulk_number(w, spec.ttl.count());
  if (waits) {
    w.bulk("WAIT");
    bulk_number(w, wait.count());
  }
  if (spec.capacity != 1) {
    w.bulk("CAPACITY");
    bulk_number(w, spec.capacity);
  }
  if (!spec.label.empty()) {
    w.bulk("LABEL");
    w.bulk(spec.label);
  }
  if (!spec.reentrancy_key.empty()) {
    w.bulk("REENTRANT");
    w.bulk(spec.reentrancy_key);
  }
  if (spec.shared) w.bulk("SHARED");
  if (brief) w.bulk("BRIEF");
  if (queued) w.bulk("QUEUED");
}

void encode_extend(RespWriter& w, std::string_view name,
                   const OwnerToken& token, milliseconds ttl) {
  w.array(4);
  w.bulk("LOCK.EXTEND");
  w.bulk(name);
  bulk_token(w, token);
  bulk_number(w, ttl.count());
}

void encode_release(RespWriter& w, std::string_view name,
                    const OwnerToken& token) {
  w.array(3);
  w.bulk("LOCK.RELEASE");
  w.bulk(name);
  bulk_token(w, token);
}

void encode_describe(RespWriter& w, std::string_view name) {
  w.array(2);
  w.bulk("LOCK.DESCRIBE");
  w.bulk(name);
}

void encode_list(RespWriter& w, std::string_view prefix, std::size_t limit) {
  w.array(3);
  w.bulk("LOCK.LIST");
  w.bulk(prefix);
  bulk_number(w, static_cast<std::int64_t>(std::min<std::size_t>(
                     limit, std::numeric_limits<std::int64_t>::max())));
}

void encode_history(RespWriter& w, std::string_view name) {
  w.array(2);
  w.bulk("LOCK.HISTORY");
  w.bulk(name);
}

void encode_watch(RespWriter& w, std::string_view prefix, milliseconds wait) {
  w.array(3);
  w.bulk("LOCK.WATCH");
  w.bulk(prefix);
  bulk_number(w, wait.count());
}

void encode_multi(RespWriter& w, const MultiSpec& spec, milliseconds wait) {
  w.array(6 + spec.names.size());
  w.bulk(spec.all_or_nothing ? "LOCK.ACQUIRE_ALL" : "LOCK.ACQUIRE_SOME");
  bulk_token(w, spec.reservation);
  bulk_number(w, spec.ttl.count());
  bulk_number(w, wait.count());
  bulk_number(w, spec.capacity);
  w.bulk(spec.label);
  for (const auto& n : spec.names) w.bulk(n);
}

void encode_counter(RespWriter& w, CounterCommand::Op op, std::string_view name,
                    std::int64_t n) {
  using Op = CounterCommand::Op;
  w.array(op == Op::get ? 2 : 3);
  w.bulk(op == Op::get   ? "COUNTER.GET"
         : op == Op::add ? "COUNTER.ADD"
                         : "COUNTER.TAKE");
  w.bulk(name);
  if (op != Op::get) bulk_number(w, n);
}

// --- decoding ----------------------------------------------------------------

Result<AcquireCommand> decode_acquire(const Request& req) {
  if (Status s = arity(req, 4, 15, "LOCK.ACQUIRE"); !s.ok()) return s.error();
  AcquireCommand c;
  auto token = token_arg(req[2]);
  if (!token) return token.error();
  auto ttl = ttl_arg(req[3]);
  if (!ttl) return ttl.error();
  c.spec.name = req[1];
  c.spec.token = *token;
  c.spec.ttl = *ttl;
  if (Status s = acquire_options(req, &c); !s.ok()) return s.error();
  return c;
}

Result<LeaseCommand> decode_extend(const Request& req) {
  if (Status s = arity(req, 4, 4, "LOCK.EXTEND"); !s.ok()) return s.error();
  auto token = token_arg(req[2]);
  if (!token) return token.error();
  auto ttl = ttl_arg(req[3]);
  if (!ttl) return ttl.error();
  return LeaseCommand{req[1], *token, *ttl};
}

Result<LeaseCommand> decode_release(const Request& req) {
  if (Status s = arity(req, 3, 3, "LOCK.RELEASE"); !s.ok()) return s.error();
  auto token = token_arg(req[2]);
  if (!token) return token.error();
  return LeaseCommand{req[1], *token, milliseconds{0}};
}

Result<std::string> decode_describe(const Request& req) {
  if (Status s = arity(req, 2, 2, "LOCK.DESCRIBE"); !s.ok()) return s.error();
  return req[1];
}

Result<ListCommand> decode_list(const Request& req) {
  if (Status s = arity(req, 3, 3, "LOCK.LIST"); !s.ok()) return s.error();
  auto limit = int_arg(req[2], "limit", 0, kMaxListLimit);
  if (!limit) return limit.error();
  return ListCommand{req[1], static_cast<std::size_t>(*limit)};
}

Result<std::string> decode_history(const Request& req) {
  if (Status s = arity(req, 2, 2, "LOCK.HISTORY"); !s.ok()) return s.error();
  return req[1];
}

// LOCK.WATCH prefix wait_ms
Result<WatchCommand> decode_watch(const Request& req) {
  if (Status s = arity(req, 3, 3, "LOCK.WATCH"); !s.ok()) return s.error();
  auto wait = int_arg(req[2], "wait_ms", 0, kMaxMs);
  if (!wait) return wait.error();
  return WatchCommand{req[1], milliseconds(*wait)};
}

// LOCK.ACQUIRE_SOME|ALL token ttl_ms wait_ms capacity label name...
Result<MultiCommand> decode_multi(const Request& req) {
  const bool all = !req.empty() && iequals(req[0], "LOCK.ACQUIRE_ALL");
  if (Status s = arity(req, 7, std::numeric_limits<std::size_t>::max(),
                       all ? "LOCK.ACQUIRE_ALL" : "LOCK.ACQUIRE_SOME");
      !s.ok()) {
    return s.error();
  }
  auto token = token_arg(req[1]);
  if (!token) return token.error();
  auto ttl = ttl_arg(req[2]);
  if (!ttl) return ttl.error();
  auto wait = int_arg(req[3], "wait_ms", 0, kMaxMs);
  if (!wait) return wait.error();
  auto cap = int_arg(req[4], "capacity", 1, kMaxU32);
  if (!cap) return cap.error();
  MultiCommand c;
  c.spec.reservation = *token;
  c.spec.ttl = *ttl;
  c.spec.capacity = static_cast<std::uint32_t>(*cap);
  c.spec.label = req[5];
  c.spec.all_or_nothing = all;
  c.spec.names.assign(req.begin() + 6, req.end());
  c.wait = milliseconds(*wait);
  return c;
}

Result<CounterCommand> decode_counter(const Request& req) {
  using Op = CounterCommand::Op;
  CounterCommand c;
  std::string_view cmd = req.empty() ? std::string_view() : req[0];
  if (iequals(cmd, "COUNTER.GET")) {
    if (Status s = arity(req, 2, 2, "COUNTER.GET"); !s.ok()) return s.error();
    c.op = Op::get;
  } else if (iequals(cmd, "COUNTER.ADD") || iequals(cmd, "COUNTER.TAKE")) {
    c.op = iequals(cmd, "COUNTER.ADD") ? Op::add : Op::take;
    if (Status s =
            arity(req, 3, 3, c.op == Op::add ? "COUNTER.ADD" : "COUNTER.TAKE");
        !s.ok()) {
      return s.error();
    }
    if (!parse_int(req[2], &c.n)) {
      return invalid_field("counter argument must be an integer");
    }
  } else {
    return invalid_field("unknown command " + core::quote_name(cmd));
  }
  c.name = req[1];
  return c;
}

}  // namespace baton::proto
