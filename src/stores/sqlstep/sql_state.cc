// stores/sqlstep/sql_state.cc — the scheduling step of the SQL stores.
#include "stores/sqlstep/sql_state.h"

#include <algorithm>
#include <limits>
#include <set>

#include "core/validate.h"

namespace baton::store::sqlstep {

std::string sql_int(std::int64_t v) { return std::to_string(v); }

std::string hex_literal(std::string_view bytes) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "X'";
  out.reserve(bytes.size() * 2 + 3);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  out += '\'';
  return out;
}

std::string in_list(const std::vector<std::string>& names) {
  std::string out = "(";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += hex_literal(names[i]);
  }
  return out + ")";
}

namespace {

OwnerToken parse_token(const std::string& hex) {
  auto t = OwnerToken::parse(hex);
  return t.ok() ? *t : OwnerToken{};
}

}  // namespace

bool Holder::has(const std::string& t) const {
  if (token == t) return true;
  std::size_t pos = 0;
  while (pos < aliases.size()) {
    std::size_t end = aliases.find(',', pos);
    if (end == std::string::npos) end = aliases.size();
    if (aliases.compare(pos, end - pos, t) == 0) return true;
    pos = end + 1;
  }
  return false;
}

bool NameState::active(std::int64_t now) const {
  return live_holders(now) > 0 || waiting(now) > 0;
}

int NameState::live_holders(std::int64_t now) const {
  int n = 0;
  for (const auto& h : holders) n += h.expires_us > now ? 1 : 0;
  return n;
}

int NameState::waiting(std::int64_t now) const {
  int n = 0;
  for (const auto& q : queue) n += (!q.withdrawn && q.live(now)) ? 1 : 0;
  return n;
}

bool NameState::fits(bool shared, std::int64_t now) const {
  int live = 0;
  for (const auto& h : holders) {
    if (h.expires_us <= now) continue;
    ++live;
    if (h.shared != shared) return false;
  }
  return shared || live < capacity;
}

const Holder* NameState::holder_of(const std::string& token) const {
  for (const auto& h : holders) {
    if (h.has(token)) return &h;
  }
  return nullptr;
}

Request* NameState::request_of(const std::string& token) {
  for (auto& q : queue) {
    if (q.token == token) return &q;
  }
  return nullptr;
}

void Tx::expire(const std::string& name) {
  NameState& s = at(name);
  const std::string n = hex_literal(name);
  bool any = false;
  for (const auto& h : s.holders) any = any || h.expires_us <= now_;
  if (any) {
    w_ += "DELETE FROM " + p_ + "holders WHERE name = " + n +
          " AND expires_us <= " + sql_int(now_) + ";";
    std::erase_if(s.holders,
                  [&](const Holder& h) { return h.expires_us <= now_; });
  }
  any = false;
  for (const auto& q : s.queue) any = any || !q.live(now_);
  if (any) {
    w_ += "DELETE FROM " + p_ + "queue WHERE name = " + n +
          " AND (deadline_us <= " + sql_int(now_) +
          " OR heartbeat_us <= " + sql_int(now_) + ");";
    std::erase_if(s.queue, [&](const Request& q) { return !q.live(now_); });
  }
}

void Tx::pump(const std::string& name) {
  NameState& s = at(name);
  for (std::size_t i = 0; i < s.queue.size();) {
    Request q = s.queue[i];
    if (q.withdrawn) {
      ++i;
      continue;
    }
    if (q.kind == 2) break;
    if (!q.rkey.empty()) {
      auto it = std::find_if(s.holders.begin(), s.holders.end(),
                             [&](const Holder& h) { return h.rkey == q.rkey; });
      if (it != s.holders.end()) {
        join(*it, q.token, q.ttl_ms);
        remove_request(name, q.id);
        continue;
      }
    }
    // Rule 18: the head is granted while it fits the holders, so
    // consecutive shared requests at the head are granted together and
    // nothing passes a request that does not fit.
    if (!s.fits(q.shared, now_)) break;
    remove_request(name, q.id);
    grant(name, q.token, q.ttl_ms, s.capacity, q.label, q.rkey, q.shared);
  }
}

void Tx::set_lock_row(const std::string& name, NameState& s, int capacity) {
  s.capacity = capacity;
  s.lock_row = true;
  const std::string& f = fencing_col_;
  w_ += "INSERT INTO " + p_ + "locks (name, capacity, " + f + ") VALUES (" +
        hex_literal(name) + ", " + sql_int(capacity) + ", " +
        sql_int(s.last_fencing) +
        (dialect_ == Dialect::mysql
             ? ") ON DUPLICATE KEY UPDATE capacity = VALUES(capacity), " + f +
                   " = VALUES(" + f + ");"
             : ") ON CONFLICT (name) DO UPDATE SET capacity = "
               "excluded.capacity, " +
                   f + " = excluded." + f + ";");
}

Holder& Tx::grant(const std::string& name, const std::string& token,
                  std::int64_t ttl_ms, int capacity, const std::string& label,
                  const std::string& rkey, bool shared) {
  NameState& s = at(name);
  s.last_fencing += 1;
  set_lock_row(name, s, capacity);
  std::set<int> used;
  for (const auto& h : s.holders) used.insert(h.slot);
  int slot = 0;
  while (used.count(slot)) ++slot;
  Holder h;
  h.name = name;
  h.slot = slot;
  h.token = token;
  h.fencing = s.last_fencing;
  h.ttl_ms = ttl_ms;
  h.granted_us = now_;
  h.expires_us = now_ + ttl_ms * 1000;
  h.holds = 1;
  h.label = label;
  h.rkey = rkey;
  h.shared = shared;
  // The unique index on (name, slot) is the unique-index lock: a second
  // insert of a taken slot fails, whatever the scheduling step decided.
  w_ += "INSERT INTO " + p_ +
        "holders (name, slot, token, fencing, ttl_ms, granted_us, "
        "expires_us, holds, label, rkey, aliases, shared) VALUES (" +
        hex_literal(name) + ", " + sql_int(slot) + ", " + hex_literal(token) +
        ", " + sql_int(h.fencing) + ", " + sql_int(ttl_ms) + ", " +
        sql_int(now_) + ", " + sql_int(h.expires_us) + ", 1, " +
        hex_literal(label) + ", " + hex_literal(rkey) + ", '', " +
        (shared ? "1" : "0") + ");";
  s.holders.push_back(std::move(h));
  return s.holders.back();
}

void Tx::join(Holder& h, const std::string& token, std::int64_t ttl_ms) {
  h.holds += 1;
  const std::int64_t want = now_ + ttl_ms * 1000;
  if (want > h.expires_us) {
    h.expires_us = want;
    h.ttl_ms = ttl_ms;
  }
  if (!h.has(token)) h.aliases += (h.aliases.empty() ? "" : ",") + token;
  w_ += "UPDATE " + p_ + "holders SET holds = " + sql_int(h.holds) +
        ", ttl_ms = " + sql_int(h.ttl_ms) +
        ", expires_us = " + sql_int(h.expires_us) +
        ", aliases = " + hex_literal(h.aliases) +
        " WHERE name = " + hex_literal(h.name) +
        " AND slot = " + sql_int(h.slot) + ";";
}

void Tx::extend(Holder& h, std::int64_t ttl_ms) {
  h.ttl_ms = ttl_ms;
  h.expires_us = now_ + ttl_ms * 1000;
  w_ += "UPDATE " + p_ + "holders SET ttl_ms = " + sql_int(ttl_ms) +
        ", expires_us = " + sql_int(h.expires_us) +
        " WHERE name = " + hex_literal(h.name) +
        " AND slot = " + sql_int(h.slot) + ";";
}

int Tx::release_hold(const std::string& name, const std::string& token) {
  NameState& s = at(name);
  for (auto it = s.holders.begin(); it != s.holders.end(); ++it) {
    if (!it->has(token)) continue;
    it->holds -= 1;
    const std::string where = " WHERE name = " + hex_literal(name) +
                              " AND slot = " + sql_int(it->slot) + ";";
    if (it->holds <= 0) {
      w_ += "DELETE FROM " + p_ + "holders" + where;
      s.holders.erase(it);
      return 0;
    }
    w_ += "UPDATE " + p_ + "holders SET holds = " + sql_int(it->holds) + where;
    return it->holds;
  }
  return -1;
}

void Tx::remove_request(const std::string& name, std::int64_t id) {
  NameState& s = at(name);
  std::erase_if(s.queue, [&](const Request& q) { return q.id == id; });
  if (id != std::numeric_limits<std::int64_t>::max()) {
    w_ += "DELETE FROM " + p_ + "queue WHERE id = " + sql_int(id) + ";";
  }
}

void Tx::enqueue(const std::string& name, const std::string& token, int kind,
                 std::int64_t ttl_ms, int capacity, const std::string& label,
                 const std::string& rkey, std::int64_t deadline_us,
                 std::optional<std::int64_t> heartbeat_us, bool shared) {
  NameState& s = at(name);
  if (!s.active(now_)) set_lock_row(name, s, capacity);
  Request q;
  q.id = std::numeric_limits<std::int64_t>::max();
  q.name = name;
  q.token = token;
  q.kind = kind;
  q.ttl_ms = ttl_ms;
  q.label = label;
  q.rkey = rkey;
  q.arrived_us = now_;
  q.deadline_us = deadline_us;
  q.heartbeat_us = heartbeat_us;
  q.shared = shared;
  w_ += "INSERT INTO " + p_ +
        "queue (name, token, kind, ttl_ms, label, rkey, arrived_us, "
        "deadline_us, heartbeat_us, shared) VALUES (" +
        hex_literal(name) + ", " + hex_literal(token) + ", " + sql_int(kind) +
        ", " + sql_int(ttl_ms) + ", " + hex_literal(label) + ", " +
        hex_literal(rkey) + ", " + sql_int(now_) + ", " + sql_int(deadline_us) +
        ", " + (heartbeat_us ? sql_int(*heartbeat_us) : "NULL") + ", " +
        (shared ? "1" : "0") + ");";
  s.queue.push_back(std::move(q));
}

void Tx::refresh(Request& q, std::int64_t deadline_us,
                 std::optional<std::int64_t> heartbeat_us) {
  q.deadline_us = deadline_us;
  q.heartbeat_us = heartbeat_us;
  w_ += "UPDATE " + p_ + "queue SET deadline_us = " + sql_int(deadline_us) +
        ", heartbeat_us = " + (heartbeat_us ? sql_int(*heartbeat_us) : "NULL") +
        " WHERE name = " + hex_literal(q.name) +
        " AND token = " + hex_literal(q.token) + ";";
}

void Tx::withdraw(const std::string& name, Request& q) {
  q.withdrawn = true;
  if (q.kind == 2) {
    w_ += "UPDATE " + p_ +
          "queue SET withdrawn = 1 WHERE token = " + hex_literal(q.token) +
          " AND kind = 2;";
  } else {
    w_ += "UPDATE " + p_ +
          "queue SET withdrawn = 1 WHERE name = " + hex_literal(name) +
          " AND token = " + hex_literal(q.token) + ";";
  }
}

Grant Tx::to_grant(const Holder& h, int capacity,
                   std::int64_t arrival_us) const {
  Grant g;
  g.name = h.name;
  g.token = parse_token(h.token);
  g.fencing_token = static_cast<std::uint64_t>(h.fencing);
  g.ttl = milliseconds{h.ttl_ms};
  g.holds = static_cast<std::uint32_t>(h.holds);
  g.capacity = static_cast<std::uint32_t>(capacity);
  g.shared = h.shared;
  g.valid_for = std::chrono::microseconds{h.expires_us - arrival_us};
  g.store_expires_at_ms = (h.expires_us + epoch_offset_us_) / 1000;
  return g;
}

std::vector<HolderInfo> Tx::holder_infos(const std::string& name) {
  std::vector<HolderInfo> out;
  for (const auto& h : at(name).holders) {
    if (h.expires_us <= now_) continue;
    out.push_back({h.label, static_cast<std::uint64_t>(h.fencing),
                   milliseconds{(h.expires_us - now_) / 1000},
                   static_cast<std::uint32_t>(h.holds), h.shared});
  }
  return out;
}

std::optional<Error> capacity_conflict(const std::string& name,
                                       const NameState& s, int cap,
                                       std::int64_t now) {
  if (!s.active(now) || s.capacity == cap) return std::nullopt;
  return Error(Errc::invalid_argument,
               "lock " + core::quote_name(name) + " has capacity " +
                   std::to_string(s.capacity) + "; this request asks " +
                   std::to_string(cap));
}

Result<Grant> extend_step(Tx& tx, const std::string& name,
                          const std::string& token, std::int64_t ttl_ms) {
  tx.schedule(name);
  NameState& s = tx.at(name);
  for (auto& h : s.holders) {
    if (!h.has(token)) continue;
    tx.extend(h, ttl_ms);
    return tx.to_grant(h, s.capacity, tx.now());
  }
  return Error(Errc::lock_lost, "lock " + core::quote_name(name) +
                                    " is not held with this owner token "
                                    "(expired, released or never granted)");
}

ReleaseResult release_step(Tx& tx, const std::string& name,
                           const std::string& token) {
  tx.expire(name);
  ReleaseResult out;
  const int left = tx.release_hold(name, token);
  if (left >= 0) {
    out.was_held = true;
    out.holds_left = static_cast<std::uint32_t>(left);
  } else if (auto* q = tx.at(name).request_of(token);
             q != nullptr && !q->withdrawn) {
    tx.withdraw(name, *q);
  }
  tx.pump(name);
  return out;
}

}  // namespace baton::store::sqlstep
