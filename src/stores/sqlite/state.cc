// stores/sqlite/state.cc — loading a name's rows and the scheduling step.
#include "stores/sqlite/state.h"

#include <algorithm>
#include <limits>
#include <set>

namespace baton::store::sq {

std::string sql_int(std::int64_t v) { return std::to_string(v); }

namespace {

std::string in_list(const std::vector<std::string>& names) {
  std::string out = "(";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += hex_literal(names[i]);
  }
  return out + ")";
}

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

Result<std::map<std::string, NameState>> load_state(
    Conn& conn, const std::string& p, const std::vector<std::string>& names) {
  const std::string in = in_list(names);
  std::map<std::string, NameState> out;
  for (const auto& n : names) out[n];
  auto locks = conn.query("SELECT name, capacity, last_fencing FROM " + p +
                          "locks WHERE name IN " + in);
  if (!locks.ok()) return std::move(locks).error();
  for (std::size_t r = 0; r < locks->rows.size(); ++r) {
    NameState& s = out[locks->at(r, 0)];
    s.lock_row = true;
    s.capacity = static_cast<int>(locks->num(r, 1));
    s.last_fencing = locks->num(r, 2);
  }
  auto hs = conn.query(
      "SELECT name, slot, token, fencing, ttl_ms, granted_us, expires_us, "
      "holds, label, rkey, aliases FROM " +
      p + "holders WHERE name IN " + in + " ORDER BY fencing");
  if (!hs.ok()) return std::move(hs).error();
  for (std::size_t r = 0; r < hs->rows.size(); ++r) {
    Holder h;
    h.name = hs->at(r, 0);
    h.slot = static_cast<int>(hs->num(r, 1));
    h.token = hs->at(r, 2);
    h.fencing = hs->num(r, 3);
    h.ttl_ms = hs->num(r, 4);
    h.granted_us = hs->num(r, 5);
    h.expires_us = hs->num(r, 6);
    h.holds = static_cast<int>(hs->num(r, 7));
    h.label = hs->at(r, 8);
    h.rkey = hs->at(r, 9);
    h.aliases = hs->at(r, 10);
    out[h.name].holders.push_back(std::move(h));
  }
  auto qs = conn.query(
      "SELECT id, name, token, kind, ttl_ms, label, rkey, arrived_us, "
      "deadline_us, heartbeat_us, withdrawn FROM " +
      p + "queue WHERE name IN " + in + " ORDER BY id");
  if (!qs.ok()) return std::move(qs).error();
  for (std::size_t r = 0; r < qs->rows.size(); ++r) {
    Request q;
    q.id = qs->num(r, 0);
    q.name = qs->at(r, 1);
    q.token = qs->at(r, 2);
    q.kind = static_cast<int>(qs->num(r, 3));
    q.ttl_ms = qs->num(r, 4);
    q.label = qs->at(r, 5);
    q.rkey = qs->at(r, 6);
    q.arrived_us = qs->num(r, 7);
    q.deadline_us = qs->num(r, 8);
    if (qs->rows[r][9]) q.heartbeat_us = qs->num(r, 9);
    q.withdrawn = qs->num(r, 10) != 0;
    out[q.name].queue.push_back(std::move(q));
  }
  return out;
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
    if (s.live_holders(now_) >= s.capacity) break;
    remove_request(name, q.id);
    grant(name, q.token, q.ttl_ms, s.capacity, q.label, q.rkey);
  }
}

void Tx::set_lock_row(const std::string& name, NameState& s, int capacity) {
  s.capacity = capacity;
  s.lock_row = true;
  w_ += "INSERT INTO " + p_ + "locks (name, capacity, last_fencing) VALUES (" +
        hex_literal(name) + ", " + sql_int(capacity) + ", " +
        sql_int(s.last_fencing) +
        ") ON CONFLICT (name) DO UPDATE SET capacity = excluded.capacity, "
        "last_fencing = excluded.last_fencing;";
}

Holder& Tx::grant(const std::string& name, const std::string& token,
                  std::int64_t ttl_ms, int capacity, const std::string& label,
                  const std::string& rkey) {
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
  // The unique index on (name, slot) is seed 001's lock: a second insert
  // of a taken slot fails, whatever the scheduling step decided.
  w_ += "INSERT INTO " + p_ +
        "holders (name, slot, token, fencing, ttl_ms, granted_us, "
        "expires_us, holds, label, rkey, aliases) VALUES (" +
        hex_literal(name) + ", " + sql_int(slot) + ", " + hex_literal(token) +
        ", " + sql_int(h.fencing) + ", " + sql_int(ttl_ms) + ", " +
        sql_int(now_) + ", " + sql_int(h.expires_us) + ", 1, " +
        hex_literal(label) + ", " + hex_literal(rkey) + ", '');";
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
                 std::optional<std::int64_t> heartbeat_us) {
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
  w_ += "INSERT INTO " + p_ +
        "queue (name, token, kind, ttl_ms, label, rkey, arrived_us, "
        "deadline_us, heartbeat_us) VALUES (" +
        hex_literal(name) + ", " + hex_literal(token) + ", " + sql_int(kind) +
        ", " + sql_int(ttl_ms) + ", " + hex_literal(label) + ", " +
        hex_literal(rkey) + ", " + sql_int(now_) + ", " + sql_int(deadline_us) +
        ", " + (heartbeat_us ? sql_int(*heartbeat_us) : "NULL") + ");";
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
  g.valid_for = std::chrono::microseconds{h.expires_us - arrival_us};
  // Reported as a Unix epoch time (core/request.h): the host's wall clock
  // now plus the lease's time left in store (boot) time.
  g.store_expires_at_ms = (wall_now_us() + (h.expires_us - now_)) / 1000;
  return g;
}

std::vector<HolderInfo> Tx::holder_infos(const std::string& name) {
  std::vector<HolderInfo> out;
  for (const auto& h : at(name).holders) {
    if (h.expires_us <= now_) continue;
    out.push_back({h.label, static_cast<std::uint64_t>(h.fencing),
                   milliseconds{(h.expires_us - now_) / 1000},
                   static_cast<std::uint32_t>(h.holds)});
  }
  return out;
}

}  // namespace baton::store::sq
