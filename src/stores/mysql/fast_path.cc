// stores/mysql/fast_path.cc — mysql://'s one-statement fast paths (schema
// version 3): the acquire of a plain capacity-1 lock that nobody holds or
// waits for, and the extend and release of the lease it made, each one
// autocommit UPDATE of the lock's locks row, which keeps that lease inline
// (h_*). See docs/stores/mysql.md, "Fast paths".
//
// Why one row is enough: every scheduling transaction reads the name's
// locks row FOR UPDATE before it decides anything and first moves an
// inline holder into holders (state.h, spill), and it leaves `others` =
// the name's holders and queue rows. So the UPDATE's condition (others = 0,
// no live inline holder) is decided under the same row lock as every other
// decision on the name. The time is the statement's database time, read
// before the row lock is waited for: an expiry judged by it is judged no
// later than it is, and a lease it grants or extends ends no later than
// it would by the time of the write.
#include "stores/mysql/store_impl.h"

namespace baton::store::my_impl {
namespace {

// The statement's database time (a constant within one statement).
constexpr const char* kNow =
    "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

// The UPDATE's result set (the last but `from_end`) changed its row.
bool changed(const std::vector<my::ResultSet>& sets, std::size_t from_end) {
  return sets.size() > from_end &&
         sets[sets.size() - 1 - from_end].affected == 1;
}

}  // namespace

bool MysqlStore::fast_path_for(const AcquireSpec& spec) const {
  return o_.fast_path && o_.serialize != my::Serialize::center &&
         spec.capacity == 1 && !spec.shared && spec.reentrancy_key.empty();
}

std::optional<Grant> MysqlStore::fast_acquire(SteadyTime d,
                                              const AcquireSpec& spec,
                                              const std::string& token,
                                              Doorbell* bell) {
  const bool take = bell != nullptr && bell->usable() && !bell->tried;
  std::unique_ptr<my::Conn> owned;
  if (!take) {
    auto c = pool_.get(d);
    if (!c.ok()) return std::nullopt;  // the full pass says what is wrong
    owned = std::move(*c);
  }
  my::Conn& conn = owned ? *owned : *bell->conn;
  const std::string ttl = std::to_string(spec.ttl.count());
  const std::string now = kNow;
  // The doorbell is taken in the UPDATE's condition, last, so only when
  // the row is granted (see "Fast paths" in docs/stores/mysql.md for why a
  // GET_LOCK run anyway, by InnoDB's semi-consistent read, is harmless).
  const std::string sql =
      "UPDATE " + o_.prefix +
      "locks SET h_fencing = (@baton_f := high_fencing + 1), high_fencing = "
      "high_fencing + 1, h_token = " +
      my::hex_literal(token) + ", h_ttl_ms = " + ttl +
      ", h_granted_us = (@baton_n := " + now + "), h_expires_us = " + now +
      " + " + ttl + " * 1000, h_label = " + my::hex_literal(spec.label) +
      " WHERE name = " + my::hex_literal(spec.name) +
      " AND capacity = 1 AND others = 0 AND (h_token = '' OR h_expires_us <= " +
      now + ")" +
      (take ? " AND GET_LOCK('" + bell->name + "', 0) = 1" : std::string()) +
      ";SELECT @baton_f, @baton_n";
  auto r = conn.query(sql, d);
  const bool granted = r.ok() && changed(*r, 1);
  if (take) {
    // Granted: the doorbell is held. Else the first full pass takes it
    // (GET_LOCK is recursive, and every let-go is RELEASE_ALL_LOCKS); a
    // broken connection took it along.
    bell->tried = granted;
    bell->set_held(granted);
    bell->check();
  } else {
    pool_.put(std::move(owned));  // a broken one is closed
  }
  // An error leaves the outcome unknown (the UPDATE may have committed):
  // the full pass with the same token finds the lease if it did (rule 17).
  if (!granted) return std::nullopt;
  const my::ResultSet& last = r->back();
  sqlstep::Holder h;
  h.name = spec.name;
  h.token = token;
  h.fencing = last.num(0, 0);
  h.ttl_ms = spec.ttl.count();
  h.granted_us = last.num(0, 1);
  h.expires_us = h.granted_us + h.ttl_ms * 1000;
  Tx tx(o_.prefix, sqlstep::Dialect::mysql, {}, h.granted_us);
  return tx.to_grant(h, 1, h.granted_us);
}

std::optional<Grant> MysqlStore::fast_extend(const CallContext& ctx,
                                             const std::string& name,
                                             const std::string& token,
                                             milliseconds ttl) {
  if (!o_.fast_path || o_.serialize == my::Serialize::center) {
    return std::nullopt;
  }
  const std::string t = std::to_string(ttl.count());
  const std::string now = kNow;
  auto r = simple_query(
      ctx, "UPDATE " + o_.prefix +
               "locks SET h_fencing = (@baton_f := h_fencing), h_ttl_ms = " +
               t + ", h_expires_us = (@baton_n := " + now + ") + " + t +
               " * 1000 WHERE name = " + my::hex_literal(name) +
               " AND h_token = " + my::hex_literal(token) +
               " AND h_expires_us > " + now + ";SELECT @baton_f, @baton_n");
  if (!r.ok() || !changed(*r, 1)) return std::nullopt;
  const my::ResultSet& last = r->back();
  sqlstep::Holder h;
  h.name = name;
  h.token = token;
  h.fencing = last.num(0, 0);
  h.ttl_ms = ttl.count();
  h.expires_us = last.num(0, 1) + h.ttl_ms * 1000;
  Tx tx(o_.prefix, sqlstep::Dialect::mysql, {}, last.num(0, 1));
  return tx.to_grant(h, 1, last.num(0, 1));
}

std::optional<ReleaseResult> MysqlStore::fast_release(SteadyTime d,
                                                      const std::string& name,
                                                      const std::string& token,
                                                      Doorbell& bell) {
  if (!o_.fast_path || o_.serialize == my::Serialize::center) {
    return std::nullopt;
  }
  const bool own_bell = bell.usable();
  std::unique_ptr<my::Conn> owned;
  if (!own_bell) {
    auto c = pool_.get(d);
    if (!c.ok()) return std::nullopt;
    owned = std::move(*c);
  }
  my::Conn& conn = owned ? *owned : *bell.conn;
  // The lease's doorbell is let go in the UPDATE's condition, last, so
  // only when the lease ends; nobody is queued then (others = 0), so
  // nobody waits on it, and letting it go before the commit wakes no one
  // too early.
  const bool ring_off = own_bell && bell.tried;
  const std::string sql =
      "UPDATE " + o_.prefix +
      "locks SET h_token = '' WHERE name = " + my::hex_literal(name) +
      " AND h_token = " + my::hex_literal(token) +
      " AND others = 0 AND h_expires_us > " + kNow +
      (ring_off ? " AND RELEASE_ALL_LOCKS() >= 0" : "");
  auto r = conn.query(sql, d);
  if (owned) {
    pool_.put(std::move(owned));
  } else {
    bell.check();
  }
  if (!r.ok() || !changed(*r, 0)) return std::nullopt;
  if (ring_off) {
    bell.tried = false;
    bell.set_held(false);
  }
  return ReleaseResult{true, 0};
}

}  // namespace baton::store::my_impl
