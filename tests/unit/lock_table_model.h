// tests/unit/lock_table_model.h — the deliberately simple model of the
// lock contract (vectors and linear scans) that lock_table_model_test.cc
// runs side by side with core::LockTable.
#ifndef BATON_TESTS_UNIT_LOCK_TABLE_MODEL_H_
#define BATON_TESTS_UNIT_LOCK_TABLE_MODEL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/lock_table.h"

namespace baton::core::model {

using namespace std::chrono_literals;

inline const std::vector<std::string> kNames = {"a", "b", "c", "d"};
inline std::uint32_t cap_of(const std::string& n) {
  return n == "c" ? 2 : n == "d" ? 3 : 1;
}

struct MLease {
  std::string name;
  OwnerToken token;
  Instant expiry;
  SessionId session = 0;
};
struct MWaiter {
  std::string name;
  OwnerToken token;
  Nanos ttl;
  Instant deadline;
  SessionId session = 0;
  bool ephemeral = false;
  bool group = false;  // all-or-nothing member (token = reservation)
};

// Outcome of one call, comparable across table and model.
struct Out {
  int code = 0;  // 0 ok, else Errc
  bool granted = false;
  Instant expiry{};
  std::size_t position = 0;
  std::vector<std::pair<std::string, Instant>> leases;  // multi
  std::size_t pending = 0;
  bool was_held = false, withdrew = false;
  std::int64_t value = 0;
  bool operator==(const Out&) const = default;
};

inline std::string show(const Out& o) {
  std::string s = "code=" + std::to_string(o.code) +
                  " granted=" + std::to_string(o.granted) + " expiry=" +
                  std::to_string(o.expiry.time_since_epoch().count()) +
                  " pos=" + std::to_string(o.position) +
                  " pending=" + std::to_string(o.pending) +
                  " held=" + std::to_string(o.was_held) +
                  " withdrew=" + std::to_string(o.withdrew) +
                  " value=" + std::to_string(o.value) + " leases=";
  for (auto& [n, e] : o.leases)
    s += n + "@" + std::to_string(e.time_since_epoch().count()) + ",";
  return s;
}

struct MEnded {
  std::string name;
  OwnerToken token;
  Instant when;
};

class Model {
 public:
  std::vector<MLease> leases;    // grant order
  std::vector<MWaiter> waiters;  // global arrival order
  std::map<std::string, std::uint32_t> caps;
  std::map<std::string, std::int64_t> counters;
  // Leases that ended (release, expiry, session release), remembered for
  // `ended_window` (the table's Limits; the test never reaches its count).
  std::vector<MEnded> ended;
  Nanos ended_window{0};

  void end(const MLease& l, Instant now) {
    ended.push_back({l.name, l.token, now});
  }
  bool is_ended(const std::string& n, const OwnerToken& t, Instant now) const {
    for (const MEnded& e : ended) {
      if (e.name == n && e.token == t && now < e.when + ended_window) {
        return true;
      }
    }
    return false;
  }

  std::size_t holders(const std::string& n) const {
    return std::count_if(leases.begin(), leases.end(),
                         [&](const MLease& l) { return l.name == n; });
  }
  bool has_waiters(const std::string& n) const {
    for (auto& w : waiters) {
      if (w.name == n) return true;
    }
    return false;
  }
  int find_lease(const std::string& n, const OwnerToken& t) const {
    for (std::size_t i = 0; i < leases.size(); ++i) {
      if (leases[i].name == n && leases[i].token == t) return int(i);
    }
    return -1;
  }
  int find_waiter(const std::string& n, const OwnerToken& t) const {
    for (std::size_t i = 0; i < waiters.size(); ++i) {
      if (waiters[i].name == n && waiters[i].token == t) return int(i);
    }
    return -1;
  }
  int head(const std::string& n) const {
    for (std::size_t i = 0; i < waiters.size(); ++i) {
      if (waiters[i].name == n) return int(i);
    }
    return -1;
  }
  bool exists(const std::string& n) const {
    return holders(n) > 0 || has_waiters(n);
  }
  void tidy() {
    for (auto it = caps.begin(); it != caps.end();) {
      it = exists(it->first) ? std::next(it) : caps.erase(it);
    }
  }
  void remove_waiter_or_group(std::size_t i) {
    if (!waiters[i].group) {
      waiters.erase(waiters.begin() + i);
      return;
    }
    OwnerToken t = waiters[i].token;
    std::erase_if(waiters,
                  [&](const MWaiter& w) { return w.group && w.token == t; });
  }
  void grant(const MWaiter& w, Instant now) {
    leases.push_back(
        {w.name, w.token, now + w.ttl, w.ephemeral ? w.session : 0});
  }
  void settle(Instant now) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (const std::string& n : kNames) {
        int h = head(n);
        if (h < 0) continue;
        MWaiter w = waiters[h];
        if (w.group) {
          bool ready = true;
          std::vector<MWaiter> members;
          for (auto& m : waiters) {
            if (m.group && m.token == w.token) members.push_back(m);
          }
          for (auto& m : members) {
            int mh = head(m.name);
            if (!waiters[mh].group || !(waiters[mh].token == w.token) ||
                holders(m.name) >= caps[m.name]) {
              ready = false;
            }
          }
          if (!ready) continue;
          for (auto& m : members) grant(m, now);
          remove_waiter_or_group(h);
          changed = true;
        } else if (holders(n) < caps[n]) {
          grant(w, now);
          waiters.erase(waiters.begin() + h);
          changed = true;
        }
      }
    }
    tidy();
  }
  void advance(Instant now) {
    while (true) {
      std::optional<Instant> t;
      for (auto& l : leases) {
        if (l.expiry <= now && (!t || l.expiry < *t)) t = l.expiry;
      }
      for (auto& w : waiters) {
        if (w.deadline <= now && (!t || w.deadline < *t)) t = w.deadline;
      }
      if (!t) return;
      for (std::size_t i = 0; i < waiters.size();) {
        if (waiters[i].deadline == *t) {
          remove_waiter_or_group(i);
          i = 0;
        } else {
          ++i;
        }
      }
      for (const MLease& l : leases) {
        if (l.expiry == *t) end(l, now);
      }
      std::erase_if(leases, [&](const MLease& l) { return l.expiry == *t; });
      settle(now);
    }
  }
};

struct Step {
  std::string what;
};

}  // namespace baton::core::model

#endif  // BATON_TESTS_UNIT_LOCK_TABLE_MODEL_H_
