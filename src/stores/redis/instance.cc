// stores/redis/instance.cc — typed script calls and reply parsing.
#include "stores/redis/instance.h"

#include <algorithm>
#include <cstdlib>

#include "core/validate.h"
#include "stores/redis/watch.h"

namespace baton::store::redis {
namespace {

using std::chrono::microseconds;

std::string str(const redisReply* r) {
  if (r == nullptr) return {};
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
    return std::string(r->str, r->len);
  }
  if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
  return {};
}

std::int64_t num(const redisReply* r) {
  if (r == nullptr) return 0;
  if (r->type == REDIS_REPLY_INTEGER) return r->integer;
  if (r->type == REDIS_REPLY_STRING) {
    return std::strtoll(std::string(r->str, r->len).c_str(), nullptr, 10);
  }
  return 0;
}

const redisReply* at(const redisReply* r, std::size_t i) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || i >= r->elements) {
    return nullptr;
  }
  return r->element[i];
}

Error bad_reply(const Target& t, const char* script) {
  return Error(Errc::internal,
               t.where() + ": unexpected reply from the " + script + " script");
}

// {'error', code, message}
Error script_error(const redisReply* r) {
  Errc code = Errc::internal;
  if (!errc_from_name(str(at(r, 1)), &code)) code = Errc::internal;
  return Error(code, str(at(r, 2)));
}

// {'granted', token, fencing, ttl, holds, capacity, expiry_us, now_us, name,
//  shared}
Result<Grant> parse_grant(const redisReply* r, std::int64_t* expiry_us) {
  auto token = OwnerToken::parse(str(at(r, 1)));
  if (!token.ok()) return std::move(token).error();
  Grant g;
  g.token = *token;
  g.fencing_token = static_cast<std::uint64_t>(num(at(r, 2)));
  g.ttl = milliseconds(num(at(r, 3)));
  g.holds = static_cast<std::uint32_t>(num(at(r, 4)));
  g.capacity = static_cast<std::uint32_t>(num(at(r, 5)));
  const std::int64_t e = num(at(r, 6)), now = num(at(r, 7));
  g.valid_for = microseconds(e - now);
  g.store_expires_at_ms = e / 1000;
  g.name = str(at(r, 8));
  g.shared = num(at(r, 9)) != 0;  // rule 18 (absent: exclusive)
  if (expiry_us != nullptr) *expiry_us = e;
  return g;
}

std::vector<HolderInfo> parse_holders(const redisReply* r) {
  std::vector<HolderInfo> out;
  for (std::size_t i = 0; r != nullptr && i < r->elements; ++i) {
    const redisReply* h = r->element[i];
    out.push_back({str(at(h, 0)), static_cast<std::uint64_t>(num(at(h, 1))),
                   milliseconds(num(at(h, 2))),
                   static_cast<std::uint32_t>(num(at(h, 3))),
                   num(at(h, 4)) != 0});
  }
  return out;
}

// {name, capacity, last_fencing, holders, waiters}
LockInfo parse_info(const redisReply* r) {
  LockInfo info;
  info.name = str(at(r, 0));
  info.capacity = static_cast<std::uint32_t>(num(at(r, 1)));
  info.last_fencing_token = static_cast<std::uint64_t>(num(at(r, 2)));
  info.holders = parse_holders(at(r, 3));
  const redisReply* ws = at(r, 4);
  for (std::size_t i = 0; ws != nullptr && i < ws->elements; ++i) {
    const redisReply* w = ws->element[i];
    info.waiters.push_back({str(at(w, 0)), milliseconds(num(at(w, 1))),
                            num(at(w, 2)) != 0, num(at(w, 3)) != 0});
  }
  return info;
}

}  // namespace

std::optional<AcqReply> parse_pushed_grant(std::string_view payload,
                                           std::string_view name) {
  // "waiter lease fencing ttl holds capacity expiry_us now_us name"
  std::string_view f[8];
  std::string_view rest = payload;
  for (auto& field : f) {
    const auto sp = rest.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    field = rest.substr(0, sp);
    rest.remove_prefix(sp + 1);
  }
  if (rest != name) return std::nullopt;
  auto token = OwnerToken::parse(f[1]);
  if (!token.ok()) return std::nullopt;
  std::int64_t v[6];
  for (int i = 0; i < 6; ++i) {
    const std::string s(f[2 + i]);
    char* end = nullptr;
    v[i] = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0') return std::nullopt;
  }
  AcqReply out;
  out.kind = AcqReply::Kind::granted;
  out.grant.token = *token;
  out.grant.fencing_token = static_cast<std::uint64_t>(v[0]);
  out.grant.ttl = milliseconds(v[1]);
  out.grant.holds = static_cast<std::uint32_t>(v[2]);
  out.grant.capacity = static_cast<std::uint32_t>(v[3]);
  out.expiry_us = v[4];
  out.now_us = v[5];
  out.grant.valid_for = microseconds(v[4] - v[5]);
  out.grant.store_expires_at_ms = v[4] / 1000;
  out.grant.name = std::string(name);
  return out;
}

std::vector<OptionSpec> common_options(std::string default_timeout) {
  OptionSpec timeout = request_timeout_option(std::move(default_timeout));
  timeout.help =
      "per-instance timeout: connect, and wait for one reply (a bare number "
      "is milliseconds)";
  timeout.aliases = {"timeout", "timeout_ms"};
  std::vector<OptionSpec> options = {
      timeout,
      prefix_option("baton:",
                    "every key and channel starts with it: scope Redis ACLs "
                    "to ~<prefix>* and &<prefix>*"),
      file_option("ca",
                  "TLS only: PEM file of the CA(s) the server's certificate "
                  "must chain to (default: the system CAs)"),
      file_option("cert", "TLS only: client certificate (PEM), with key"),
      file_option("key", "TLS only: the client certificate's key (PEM)"),
  };
  for (OptionSpec& p : password_options("REDISCLI_AUTH")) {
    options.push_back(std::move(p));
  }
  return options;
}

Result<StoreConfig> config_of(const StoreUrl& url) {
  auto bad = [&](const std::string& why) {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe + "\": " + why);
  };
  const OptionValues& o = url.options;
  const bool redlock = url.scheme == "redlock";
  const bool tls = url.scheme == "rediss" || (redlock && o.flag("tls"));
  StoreConfig c;
  c.prefix = o.text("prefix");
  if (c.prefix.empty() || c.prefix.find('\0') != std::string::npos ||
      c.prefix.size() > 256) {
    return bad("prefix must be 1..256 bytes without NUL");
  }
  for (const char* k : {"ca", "cert", "key"}) {
    if (!tls && o.given(k)) {
      return bad(std::string(k) + " is a TLS option but TLS is off (" +
                 (redlock ? "add tls=1" : "write rediss:// for TLS") + ")");
    }
  }
  Target t;
  t.user = url.user;
  auto password = store_password(url, "REDISCLI_AUTH");
  if (!password.ok()) return std::move(password).error();
  t.password = std::move(*password);
  t.timeout = o.duration("request_timeout");
  t.prefix = c.prefix;
  if (redlock) t.restart_guard = o.duration("restart_guard");
  if (!url.path.empty()) {
    char* end = nullptr;
    const long db = std::strtol(url.path.c_str(), &end, 10);
    if (*end != '\0' || db < 0 || db > 1000000) {
      return bad("database \"" + url.path + "\" is not a number");
    }
    t.db = static_cast<int>(db);
  }
  if (tls) {
    auto ctx =
        TlsContext::create({o.text("ca"), o.text("cert"), o.text("key")});
    if (!ctx.ok()) return bad(ctx.error().message());
    t.tls = std::move(*ctx);
  }
  for (const auto& h : url.hosts) {
    t.host = h.host;
    t.port = h.port;
    c.targets.push_back(t);
  }
  return c;
}

Result<ReplyPtr> Instance::run(const Script& s, std::vector<std::string> args,
                               const CallContext& ctx) {
  args.insert(args.begin(), prefix_);
  return pool_.eval(s, args, ctx);
}

Result<AcqReply> Instance::acquire(const AcquireSpec& spec, const char* mode,
                                   std::int64_t wait_ms, const CallContext& ctx,
                                   std::int64_t ticket, std::int64_t seq) {
  std::vector<std::string> args = {spec.name,
                                   spec.token.to_string(),
                                   std::to_string(spec.ttl.count()),
                                   std::to_string(spec.capacity),
                                   spec.label,
                                   spec.reentrancy_key,
                                   mode,
                                   std::to_string(wait_ms)};
  args.push_back(inbox_);
  // The trailing arguments only when needed (see the script).
  if (spec.shared || ticket >= 0 || seq > 0) {
    args.push_back(spec.shared ? "1" : "0");
  }
  if (ticket >= 0 || seq > 0) {
    args.push_back(ticket >= 0 ? std::to_string(ticket) : std::string());
  }
  if (seq > 0) args.push_back(std::to_string(seq));
  auto r = run(scripts().acquire, std::move(args), ctx);
  if (!r.ok()) return std::move(r).error();
  const redisReply* rep = r->get();
  const std::string kind = str(at(rep, 0));
  AcqReply out;
  if (kind == "g") {  // the fast path: {'g', fencing, expiry_us, now_us}
    Grant& g = out.grant;
    g.token = spec.token;
    g.name = spec.name;
    g.fencing_token = static_cast<std::uint64_t>(num(at(rep, 1)));
    g.ttl = spec.ttl;
    g.holds = 1;
    g.capacity = spec.capacity;
    g.shared = spec.shared;
    out.expiry_us = num(at(rep, 2));
    out.now_us = num(at(rep, 3));
    g.valid_for = microseconds(out.expiry_us - out.now_us);
    g.store_expires_at_ms = out.expiry_us / 1000;
    out.kind = AcqReply::Kind::granted;
  } else if (kind == "granted") {
    auto g = parse_grant(rep, &out.expiry_us);
    if (!g.ok()) return std::move(g).error();
    out.kind = AcqReply::Kind::granted;
    out.grant = std::move(*g);
    out.now_us = num(at(rep, 7));
  } else if (kind == "queued") {
    out.kind = AcqReply::Kind::queued;
    out.position = static_cast<std::size_t>(num(at(rep, 1)));
    out.now_us = num(at(rep, 2));
    out.next_us = num(at(rep, 3));
    if (rep->elements > 4) out.ticket = num(at(rep, 4));
  } else if (kind == "busy") {
    out.kind = AcqReply::Kind::busy;
    out.busy = Error(Errc::not_acquired, str(at(rep, 1)))
                   .with_holders(parse_holders(at(rep, 2)));
  } else if (kind == "timeout") {
    out.kind = AcqReply::Kind::timeout;
  } else if (kind == "withdrawn") {
    out.kind = AcqReply::Kind::withdrawn;
  } else if (kind == "error") {
    return script_error(rep);
  } else {
    return bad_reply(target(), "acquire");
  }
  return out;
}

Result<Grant> Instance::extend(std::string_view name, const OwnerToken& token,
                               milliseconds ttl, const CallContext& ctx) {
  auto r = run(
      scripts().extend,
      {std::string(name), token.to_string(), std::to_string(ttl.count())}, ctx);
  if (!r.ok()) return std::move(r).error();
  const std::string kind = str(at(r->get(), 0));
  if (kind == "error") return script_error(r->get());
  if (kind != "granted") return bad_reply(target(), "extend");
  return parse_grant(r->get(), nullptr);
}

Result<ReleaseResult> Instance::release(std::string_view name,
                                        const OwnerToken& token,
                                        const CallContext& ctx,
                                        std::int64_t seq) {
  std::vector<std::string> args = {std::string(name), token.to_string()};
  if (seq > 0) args.push_back(std::to_string(seq));
  auto r = run(scripts().release, std::move(args), ctx);
  if (!r.ok()) return std::move(r).error();
  if (str(at(r->get(), 0)) != "released") {
    return bad_reply(target(), "release");
  }
  ReleaseResult out;
  out.was_held = num(at(r->get(), 1)) != 0;
  out.holds_left = static_cast<std::uint32_t>(num(at(r->get(), 2)));
  return out;
}

Result<LockInfo> Instance::describe(std::string_view name,
                                    const CallContext& ctx) {
  auto r = run(scripts().describe, {std::string(name)}, ctx);
  if (!r.ok()) return std::move(r).error();
  if ((*r)->type != REDIS_REPLY_ARRAY) return bad_reply(target(), "describe");
  return parse_info(r->get());
}

// The lock keys are found with SCAN (no index is kept: writing one cost
// every acquire and release a sorted-set update, docs/stores/redis.md,
// "Listing"), a cursor walk that never blocks the server; the names are
// then described in sorted batches by the list script, which skips locks
// that ended meanwhile.
Result<std::vector<LockInfo>> Instance::list(std::string_view prefix,
                                             std::size_t limit,
                                             const CallContext& ctx) {
  const std::string keys = prefix_ + "l:";
  const std::string match = glob_escape(keys) + glob_escape(prefix) + "*";
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    auto r = pool_.read({"SCAN", cursor, "MATCH", match, "COUNT", "1000"}, ctx);
    if (!r.ok()) return std::move(r).error();
    const redisReply* rep = r->get();
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        at(rep, 1)->type != REDIS_REPLY_ARRAY) {
      return bad_reply(target(), "SCAN");
    }
    cursor = str(at(rep, 0));
    const redisReply* batch = at(rep, 1);
    for (std::size_t i = 0; i < batch->elements; ++i) {
      std::string k = str(batch->element[i]);
      if (k.size() > keys.size()) names.push_back(k.substr(keys.size()));
    }
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<LockInfo> out;
  constexpr std::size_t kBatch = 100;
  for (std::size_t i = 0; i < names.size() && out.size() < limit; i += kBatch) {
    const std::size_t end = std::min(names.size(), i + kBatch);
    auto r = run(
        scripts().list,
        std::vector<std::string>(names.begin() + i, names.begin() + end), ctx);
    if (!r.ok()) return std::move(r).error();
    if ((*r)->type != REDIS_REPLY_ARRAY) return bad_reply(target(), "list");
    for (std::size_t j = 0; j < (*r)->elements && out.size() < limit; ++j) {
      out.push_back(parse_info((*r)->element[j]));
    }
  }
  return out;
}

Result<MultiReply> Instance::multi(const MultiSpec& spec, const char* mode,
                                   std::int64_t queue_ms,
                                   const CallContext& ctx, std::int64_t seq) {
  std::vector<std::string> args = {
      spec.reservation.to_string(),    std::to_string(spec.ttl.count()),
      std::to_string(spec.capacity),   spec.label,
      spec.all_or_nothing ? "1" : "0", mode,
      std::to_string(queue_ms),        std::to_string(spec.names.size())};
  args.insert(args.end(), spec.names.begin(), spec.names.end());
  args.push_back(seq > 0 ? std::to_string(seq) : std::string());
  args.push_back(inbox_);
  auto r = run(scripts().multi, std::move(args), ctx);
  if (!r.ok()) return std::move(r).error();
  const redisReply* rep = r->get();
  const std::string kind = str(at(rep, 0));
  MultiReply out;
  if (kind == "error") return script_error(rep);
  if (kind == "timeout") {
    out.kind = MultiReply::Kind::timeout;
    return out;
  }
  if (kind == "withdrawn") {
    out.kind = MultiReply::Kind::withdrawn;
    return out;
  }
  if (kind == "busy") {
    out.kind = MultiReply::Kind::busy;
    out.busy = Error(Errc::not_acquired, str(at(rep, 1)))
                   .with_holders(parse_holders(at(rep, 2)));
    return out;
  }
  if (kind != "multi") return bad_reply(target(), "multi");
  out.pending = static_cast<std::size_t>(num(at(rep, 1)));
  out.now_us = num(at(rep, 2));
  for (std::size_t i = 3; i < rep->elements; ++i) {
    auto g = parse_grant(rep->element[i], nullptr);
    if (!g.ok()) return std::move(g).error();
    out.grants.push_back(std::move(*g));
  }
  return out;
}

Result<std::uint64_t> Instance::fence(std::string_view name,
                                      const OwnerToken& token,
                                      std::uint64_t floor,
                                      const CallContext& ctx) {
  auto r =
      run(scripts().fence,
          {std::string(name), token.to_string(), std::to_string(floor)}, ctx);
  if (!r.ok()) return std::move(r).error();
  if (str(at(r->get(), 0)) != "fenced") return bad_reply(target(), "fence");
  return static_cast<std::uint64_t>(num(at(r->get(), 1)));
}

Result<std::int64_t> Instance::counter_get(std::string_view name,
                                           const CallContext& ctx) {
  auto r = run(scripts().counter_get, {std::string(name)}, ctx);
  if (!r.ok()) return std::move(r).error();
  return num(r->get());
}

Result<std::int64_t> Instance::counter_add(std::string_view name,
                                           std::int64_t delta,
                                           const CallContext& ctx) {
  auto r = run(scripts().counter_add,
               {std::string(name), std::to_string(delta)}, ctx);
  if (!r.ok()) return std::move(r).error();
  if (str(at(r->get(), 0)) == "overflow") {
    return Error(Errc::invalid_argument,
                 "counter " + core::quote_name(name) + ": adding " +
                     std::to_string(delta) + " would overflow");
  }
  return num(at(r->get(), 1));
}

Result<std::int64_t> Instance::counter_take(std::string_view name,
                                            std::int64_t n,
                                            const CallContext& ctx) {
  auto r =
      run(scripts().counter_take, {std::string(name), std::to_string(n)}, ctx);
  if (!r.ok()) return std::move(r).error();
  if (str(at(r->get(), 0)) == "short") {
    return Error(Errc::not_acquired, "counter " + core::quote_name(name) +
                                         " is " + str(at(r->get(), 1)) +
                                         "; cannot take " + std::to_string(n));
  }
  return num(at(r->get(), 1));
}

}  // namespace baton::store::redis
