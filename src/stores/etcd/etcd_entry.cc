// stores/etcd/etcd_entry.cc — keys and values of the etcd:// store.
#include "stores/etcd/etcd_entry.h"

#include <algorithm>
#include <charconv>

namespace baton::store::etcd {
namespace {

constexpr std::size_t kOwnerSize = 32;  // an owner token's hex

// Reads one space-terminated decimal number from `s` at `*pos`.
template <class T>
bool number(std::string_view s, std::size_t* pos, T* out) {
  const std::size_t end = s.find(' ', *pos);
  if (end == std::string_view::npos) return false;
  auto [p, ec] = std::from_chars(s.data() + *pos, s.data() + end, *out);
  if (ec != std::errc() || p != s.data() + end) return false;
  *pos = end + 1;
  return true;
}

}  // namespace

// "b1 " ("b2 " for a shared request), then "<held + 2 if the lease is shared>
// <all + 2 if the owner leads the label> <cap> <holds> <lease_s> <fencing>
// <queued_at> <label length> <key length> " then the label (after the
// owner token) and the reentrancy key.
std::string encode(const Value& v) {
  std::string s = v.shared ? "b2 " : "b1 ";
  auto add = [&](std::int64_t n) { s += std::to_string(n) + " "; };
  const bool owner = v.owner.size() == kOwnerSize;
  add((v.held ? 1 : 0) | (v.shared_lease ? 2 : 0));
  add((v.all ? 1 : 0) | (owner ? 2 : 0));
  add(v.capacity);
  add(v.holds);
  add(v.lease_s);
  add(v.fencing);
  add(v.queued_at_ms);
  add(static_cast<std::int64_t>(v.label.size() + (owner ? kOwnerSize : 0)));
  add(static_cast<std::int64_t>(v.reentrancy_key.size()));
  if (owner) s += v.owner;
  s += v.label;
  s += v.reentrancy_key;
  return s;
}

std::optional<Value> decode(std::string_view data) {
  const std::string_view head = data.substr(0, 3);
  if (head != "b1 " && head != "b2 ") return std::nullopt;
  std::size_t pos = 3;
  Value v;
  v.shared = head == "b2 ";
  int held = 0, all = 0;
  std::size_t llen = 0, klen = 0;
  if (!number(data, &pos, &held) || !number(data, &pos, &all) ||
      !number(data, &pos, &v.capacity) || !number(data, &pos, &v.holds) ||
      !number(data, &pos, &v.lease_s) || !number(data, &pos, &v.fencing) ||
      !number(data, &pos, &v.queued_at_ms) || !number(data, &pos, &llen) ||
      !number(data, &pos, &klen) || data.size() - pos != llen + klen) {
    return std::nullopt;
  }
  if (held < 0 || held > 3 || all < 0 || all > 3) return std::nullopt;
  v.held = (held & 1) != 0;
  v.shared_lease = (held & 2) != 0;
  v.all = (all & 1) != 0;
  if ((all & 2) != 0) {
    if (llen < kOwnerSize) return std::nullopt;
    v.owner = std::string(data.substr(pos, kOwnerSize));
    pos += kOwnerSize;
    llen -= kOwnerSize;
  }
  v.label = std::string(data.substr(pos, llen));
  v.reentrancy_key = std::string(data.substr(pos + llen, klen));
  return v;
}

int Queue::index_of(const OwnerToken& token) const {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].token == token) return static_cast<int>(i);
  }
  return -1;
}

std::size_t Queue::held() const {
  std::size_t n = 0;
  for (const auto& e : entries) n += e.v.held ? 1 : 0;
  return n;
}

std::size_t Queue::taken_before(std::size_t pos) const {
  std::size_t n = held();
  for (std::size_t i = 0; i < pos && i < entries.size(); ++i) {
    if (!entries[i].v.held) ++n;
  }
  return n;
}

bool Queue::blocked(std::size_t pos, bool shared,
                    std::uint32_t capacity) const {
  if (!shared) return taken_before(pos) >= capacity;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Value& v = entries[i].v;
    if (v.shared) continue;
    if (v.held || i < pos) return true;  // an exclusive holder, or one ahead
  }
  return false;
}

int Queue::exclusive_before(std::size_t pos) const {
  for (std::size_t i = std::min(pos, entries.size()); i-- > 0;) {
    if (!entries[i].v.shared) return static_cast<int>(i);
  }
  return -1;
}

std::string escape_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_name(std::string_view escaped) {
  std::string out;
  out.reserve(escaped.size());
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '%' && i + 2 < escaped.size() + 0 &&
        escaped.substr(i, 3) == "%25") {
      out += '%';
      i += 2;
    } else if (escaped[i] == '%' && escaped.substr(i, 3) == "%2F") {
      out += '/';
      i += 2;
    } else {
      out += escaped[i];
    }
  }
  return out;
}

bool parse_entry(std::string_view dir, std::string key, std::int64_t create,
                 std::int64_t mod, std::int64_t lease, std::string_view value,
                 Entry* e) {
  if (key.size() != dir.size() + 32 || key.compare(0, dir.size(), dir) != 0) {
    return false;
  }
  auto v = decode(value);
  if (!v) return false;
  auto token = OwnerToken::parse(v->owner.empty()
                                     ? std::string_view(key).substr(dir.size())
                                     : std::string_view(v->owner));
  if (!token.ok()) return false;
  e->key = std::move(key);
  e->token = *token;
  e->create_rev = create;
  e->mod_rev = mod;
  e->lease = lease;
  e->v = std::move(*v);
  return true;
}

}  // namespace baton::store::etcd
