// stores/mysql/doorbell.cc — doorbell names and whom a waiter waits for.
#include "stores/mysql/doorbell.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/hash.h"

namespace baton::store::my {
namespace {

// FNV-1a 64 over the parts (each followed by a NUL, so that the parts'
// boundaries count), from `basis`.
std::uint64_t fnv(std::uint64_t basis,
                  std::initializer_list<std::string_view> parts) {
  std::uint64_t h = basis;
  for (std::string_view p : parts) {
    for (unsigned char c : p) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
    h ^= 0;
    h *= 0x100000001b3ULL;
  }
  return core::mix64(h);  // spreads FNV's weak low bits
}

}  // namespace

std::string doorbell_name(std::string_view where, std::string_view prefix,
                          std::string_view name, std::string_view token) {
  const std::uint64_t a =
      fnv(0xcbf29ce484222325ULL, {where, prefix, name, token});
  const std::uint64_t b =
      fnv(0x84222325cbf29ce4ULL, {token, name, prefix, where});
  char buf[48];
  std::snprintf(buf, sizeof buf, "baton:%016llx%016llx",
                static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

std::optional<BellTarget> bell_target(const sqlstep::NameState& s,
                                      const std::string& token,
                                      std::int64_t now) {
  struct Entry {
    const std::string* token;
    bool shared;
    std::int64_t due;
    int kind;  // 0 a plain acquire or a holder
  };
  std::vector<Entry> line;
  for (const auto& h : s.holders) {
    if (h.expires_us > now)
      line.push_back({&h.token, h.shared, h.expires_us, 0});
  }
  int me = -1;
  for (const auto& q : s.queue) {
    if (q.withdrawn || !q.live(now)) continue;
    if (q.token == token) me = static_cast<int>(line.size());
    std::int64_t due = q.deadline_us;
    if (q.heartbeat_us) due = std::min(due, *q.heartbeat_us);
    line.push_back({&q.token, q.shared, due, q.kind});
    if (me >= 0) break;
  }
  if (me <= 0) return std::nullopt;
  int j = me - 1;
  if (line[me].shared) {
    while (j >= 0 && line[j].shared) --j;
  } else if (s.capacity > 1 && me - s.capacity >= 0) {
    j = me - s.capacity;
  }
  if (j < 0) return std::nullopt;
  BellTarget t;
  t.token = *line[j].token;
  t.due_in_us = std::max<std::int64_t>(0, line[j].due - now);
  t.exact = s.capacity <= 1 && line[j].kind == 0;
  return t;
}

}  // namespace baton::store::my
