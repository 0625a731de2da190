#include "proto/commands.h"

#include <charconv>
#include <map>

namespace baton::proto {

void write_grant(RespWriter& w, const core::Grant& g) {
  w.array(19);
  w.bulk("granted");
  w.bulk("name");
  w.bulk(g.name);
  w.bulk("token");
  w.bulk(g.token.to_string());
  w.bulk("fencing");
  w.integer(static_cast<std::int64_t>(g.fencing_token));
  w.bulk("ttl_ms");
  w.integer(g.ttl.count());
  w.bulk("holds");
  w.integer(g.holds);
  w.bulk("capacity");
  w.integer(g.capacity);
  w.bulk("valid_for_us");
  w.integer(g.valid_for.count());
  w.bulk("expires_at_ms");
  w.integer(g.store_expires_at_ms);
  w.bulk("shared");
  w.integer(g.shared ? 1 : 0);
}

void write_brief_grant(RespWriter& w, const core::Grant& g) {
  w.array(4);
  w.integer(static_cast<std::int64_t>(g.fencing_token));
  w.integer(g.valid_for.count());
  w.integer(g.store_expires_at_ms);
  w.integer(g.holds);
}

bool brief_fits(const core::Grant& g, const AcquireSpec& asked) {
  return g.token == asked.token && g.ttl == asked.ttl &&
         g.capacity == asked.capacity && g.shared == asked.shared;
}

void write_holder(RespWriter& w, const HolderInfo& h) {
  w.array(10);
  w.bulk("label");
  w.bulk(h.label);
  w.bulk("fencing");
  w.integer(static_cast<std::int64_t>(h.fencing_token));
  w.bulk("time_left_ms");
  w.integer(h.time_left.count());
  w.bulk("holds");
  w.integer(h.holds);
  w.bulk("shared");
  w.integer(h.shared ? 1 : 0);
}

void write_not_acquired(RespWriter& w, const Error& e) {
  w.array(3);
  w.bulk("not_acquired");
  w.bulk(e.message());
  w.array(e.holders().size());
  for (const auto& h : e.holders()) write_holder(w, h);
}

void write_error(RespWriter& w, const Error& e) {
  std::string s(errc_name(e.code()));
  s += ' ';
  s += e.message();
  w.error(s);
}

void write_lock_info(RespWriter& w, const LockInfo& info) {
  w.array(10);
  w.bulk("name");
  w.bulk(info.name);
  w.bulk("capacity");
  w.integer(info.capacity);
  w.bulk("last_fencing");
  w.integer(static_cast<std::int64_t>(info.last_fencing_token));
  w.bulk("holders");
  w.array(info.holders.size());
  for (const auto& h : info.holders) write_holder(w, h);
  w.bulk("waiters");
  w.array(info.waiters.size());
  for (const auto& x : info.waiters) {
    w.array(8);
    w.bulk("label");
    w.bulk(x.label);
    w.bulk("waited_ms");
    w.integer(x.waited.count());
    w.bulk("all_or_nothing");
    w.integer(x.all_or_nothing ? 1 : 0);
    w.bulk("shared");
    w.integer(x.shared ? 1 : 0);
  }
}

void write_release(RespWriter& w, const core::ReleaseResult& r) {
  w.array(4);
  w.bulk("was_held");
  w.integer(r.was_held ? 1 : 0);
  w.bulk("holds_left");
  w.integer(r.holds_left);
}

void write_queued(RespWriter& w, std::size_t position) {
  w.simple("queued " + std::to_string(position));
}

// --- decoding -------------------------------------------------------------

namespace {

Error bad(std::string_view what) {
  return Error(Errc::internal,
               "unexpected reply from batond: " + std::string(what));
}

// A flat key/value array starting at `from` -> map of key to element.
bool as_map(const Reply& r, std::size_t from,
            std::map<std::string, const Reply*>* out) {
  if (r.type != Reply::Type::array || (r.elements.size() - from) % 2 != 0 ||
      r.elements.size() < from) {
    return false;
  }
  for (std::size_t i = from; i + 1 < r.elements.size(); i += 2) {
    if (r.elements[i].type != Reply::Type::string) return false;
    (*out)[r.elements[i].str] = &r.elements[i + 1];
  }
  return true;
}

bool get_int(const std::map<std::string, const Reply*>& m, const char* key,
             std::int64_t* v) {
  auto it = m.find(key);
  if (it == m.end() || it->second->type != Reply::Type::integer) return false;
  *v = it->second->integer;
  return true;
}
bool get_str(const std::map<std::string, const Reply*>& m, const char* key,
             std::string* v) {
  auto it = m.find(key);
  if (it == m.end() || it->second->type != Reply::Type::string) return false;
  *v = it->second->str;
  return true;
}

Result<HolderInfo> read_holder(const Reply& r) {
  std::map<std::string, const Reply*> m;
  HolderInfo h;
  std::int64_t f = 0, t = 0, holds = 0;
  if (!as_map(r, 0, &m) || !get_str(m, "label", &h.label) ||
      !get_int(m, "fencing", &f) || !get_int(m, "time_left_ms", &t) ||
      !get_int(m, "holds", &holds)) {
    return bad("holder");
  }
  h.fencing_token = static_cast<std::uint64_t>(f);
  h.time_left = std::chrono::milliseconds(t);
  h.holds = static_cast<std::uint32_t>(holds);
  std::int64_t shared = 0;  // absent from batond before rule 18
  h.shared = get_int(m, "shared", &shared) && shared != 0;
  return h;
}

}  // namespace

bool is_failure(const Reply& r) {
  return r.type == Reply::Type::error ||
         (r.type == Reply::Type::array && !r.elements.empty() &&
          r.elements[0].type == Reply::Type::string &&
          r.elements[0].str == "not_acquired");
}

Error error_from_reply(const Reply& r) {
  if (r.type == Reply::Type::error) {
    std::string_view s = r.str;
    auto sp = s.find(' ');
    Errc code;
    if (errc_from_name(s.substr(0, sp), &code)) {
      return Error(code, sp == std::string_view::npos
                             ? std::string()
                             : std::string(s.substr(sp + 1)));
    }
    if (s.starts_with("NOAUTH") || s.starts_with("WRONGPASS")) {
      return Error(Errc::permission_denied, std::string(s));
    }
    return Error(Errc::internal, "batond: " + std::string(s));
  }
  if (is_failure(r) && r.elements.size() == 3 &&
      r.elements[1].type == Reply::Type::string &&
      r.elements[2].type == Reply::Type::array) {
    std::vector<HolderInfo> holders;
    for (const auto& e : r.elements[2].elements) {
      auto h = read_holder(e);
      if (!h) return h.error();
      holders.push_back(*h);
    }
    return Error(Errc::not_acquired, r.elements[1].str)
        .with_holders(std::move(holders));
  }
  return bad("not an error");
}

Result<core::Grant> read_grant(const Reply& r) {
  if (is_failure(r)) return error_from_reply(r);
  std::map<std::string, const Reply*> m;
  if (r.type != Reply::Type::array || r.elements.empty() ||
      r.elements[0].str != "granted" || !as_map(r, 1, &m)) {
    return bad("grant");
  }
  core::Grant g;
  std::string token;
  std::int64_t f = 0, ttl = 0, holds = 0, cap = 0, vf = 0, exp = 0;
  if (!get_str(m, "name", &g.name) || !get_str(m, "token", &token) ||
      !get_int(m, "fencing", &f) || !get_int(m, "ttl_ms", &ttl) ||
      !get_int(m, "holds", &holds) || !get_int(m, "capacity", &cap) ||
      !get_int(m, "valid_for_us", &vf) || !get_int(m, "expires_at_ms", &exp)) {
    return bad("grant fields");
  }
  auto t = OwnerToken::parse(token);
  if (!t) return bad("grant token");
  g.token = *t;
  g.fencing_token = static_cast<std::uint64_t>(f);
  g.ttl = std::chrono::milliseconds(ttl);
  g.holds = static_cast<std::uint32_t>(holds);
  g.capacity = static_cast<std::uint32_t>(cap);
  g.valid_for = std::chrono::microseconds(vf);
  g.store_expires_at_ms = exp;
  std::int64_t shared = 0;  // absent from batond before rule 18
  g.shared = get_int(m, "shared", &shared) && shared != 0;
  return g;
}

Result<core::Grant> read_grant(const Reply& r, const AcquireSpec& asked) {
  if (r.type != Reply::Type::array || r.elements.size() != 4 ||
      r.elements[0].type != Reply::Type::integer) {
    return read_grant(r);  // the full form (or a failure)
  }
  for (const auto& e : r.elements) {
    if (e.type != Reply::Type::integer) return bad("brief grant");
  }
  if (r.elements[0].integer <= 0 || r.elements[3].integer <= 0) {
    return bad("brief grant fields");
  }
  core::Grant g;
  g.name = asked.name;
  g.token = asked.token;
  g.ttl = asked.ttl;
  g.capacity = asked.capacity;
  g.shared = asked.shared;
  g.fencing_token = static_cast<std::uint64_t>(r.elements[0].integer);
  g.valid_for = std::chrono::microseconds(r.elements[1].integer);
  g.store_expires_at_ms = r.elements[2].integer;
  g.holds = static_cast<std::uint32_t>(r.elements[3].integer);
  return g;
}

Result<std::vector<core::Grant>> read_grants(const Reply& r) {
  if (is_failure(r)) return error_from_reply(r);
  if (r.type != Reply::Type::array) return bad("grant list");
  std::vector<core::Grant> out;
  for (const auto& e : r.elements) {
    auto g = read_grant(e);
    if (!g) return g.error();
    out.push_back(std::move(*g));
  }
  return out;
}

Result<LockInfo> read_lock_info(const Reply& r) {
  if (is_failure(r)) return error_from_reply(r);
  std::map<std::string, const Reply*> m;
  LockInfo info;
  std::int64_t cap = 0, last = 0;
  if (!as_map(r, 0, &m) || !get_str(m, "name", &info.name) ||
      !get_int(m, "capacity", &cap) || !get_int(m, "last_fencing", &last) ||
      !m.count("holders") || !m.count("waiters") ||
      m["holders"]->type != Reply::Type::array ||
      m["waiters"]->type != Reply::Type::array) {
    return bad("lock info");
  }
  info.capacity = static_cast<std::uint32_t>(cap);
  info.last_fencing_token = static_cast<std::uint64_t>(last);
  for (const auto& e : m["holders"]->elements) {
    auto h = read_holder(e);
    if (!h) return h.error();
    info.holders.push_back(std::move(*h));
  }
  for (const auto& e : m["waiters"]->elements) {
    std::map<std::string, const Reply*> wm;
    WaiterInfo wi;
    std::int64_t waited = 0, aon = 0;
    if (!as_map(e, 0, &wm) || !get_str(wm, "label", &wi.label) ||
        !get_int(wm, "waited_ms", &waited) ||
        !get_int(wm, "all_or_nothing", &aon)) {
      return bad("waiter");
    }
    wi.waited = std::chrono::milliseconds(waited);
    wi.all_or_nothing = aon != 0;
    std::int64_t shared = 0;
    wi.shared = get_int(wm, "shared", &shared) && shared != 0;
    info.waiters.push_back(std::move(wi));
  }
  return info;
}

Result<std::vector<LockInfo>> read_lock_infos(const Reply& r) {
  if (is_failure(r)) return error_from_reply(r);
  if (r.type != Reply::Type::array) return bad("lock list");
  std::vector<LockInfo> out;
  for (const auto& e : r.elements) {
    auto i = read_lock_info(e);
    if (!i) return i.error();
    out.push_back(std::move(*i));
  }
  return out;
}

Result<core::ReleaseResult> read_release(const Reply& r) {
  if (is_failure(r)) return error_from_reply(r);
  std::map<std::string, const Reply*> m;
  std::int64_t held = 0, left = 0;
  if (!as_map(r, 0, &m) || !get_int(m, "was_held", &held) ||
      !get_int(m, "holds_left", &left)) {
    return bad("release");
  }
  return core::ReleaseResult{held != 0, static_cast<std::uint32_t>(left)};
}

Result<std::int64_t> read_integer(const Reply& r) {
  if (is_failure(r)) return error_from_reply(r);
  if (r.type != Reply::Type::integer) return bad("integer");
  return r.integer;
}

bool read_queued(const Reply& r, std::uint32_t* position) {
  constexpr std::string_view kWord = "queued";
  if (r.type != Reply::Type::status || !r.str.starts_with(kWord)) return false;
  std::string_view rest = std::string_view(r.str).substr(kWord.size());
  if (!rest.empty() && rest.front() != ' ') return false;
  std::uint32_t p = 0;
  if (rest.size() > 1) {
    auto [end, ec] =
        std::from_chars(rest.data() + 1, rest.data() + rest.size(), p);
    if (ec != std::errc() || end != rest.data() + rest.size()) p = 0;
  }
  *position = p;
  return true;
}

}  // namespace baton::proto
