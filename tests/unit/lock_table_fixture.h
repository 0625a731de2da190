// tests/unit/lock_table_fixture.h — the LockTableTest fixture shared by
// lock_table_test.cc and lock_table_multi_test.cc.
#ifndef BATON_TESTS_UNIT_LOCK_TABLE_FIXTURE_H_
#define BATON_TESTS_UNIT_LOCK_TABLE_FIXTURE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "core/lock_table.h"

namespace baton::core {

using namespace std::chrono_literals;

class LockTableTest : public ::testing::Test {
 protected:
  OwnerToken tok() { return OwnerToken{7, ++next_}; }

  AcquireRequest req(std::string_view name, OwnerToken t, Nanos ttl = Nanos(1s),
                     std::uint32_t capacity = 1) {
    AcquireRequest r;
    r.name = name;
    r.token = t;
    r.ttl = ttl;
    r.capacity = capacity;
    r.label = "label";
    return r;
  }
  Result<AcquireOutcome> try_acquire(std::string_view name, OwnerToken t,
                                     Nanos ttl = Nanos(1s),
                                     std::uint32_t capacity = 1) {
    return table_.acquire(req(name, t, ttl, capacity));
  }
  Result<AcquireOutcome> wait_acquire(std::string_view name, OwnerToken t,
                                      Nanos wait, Nanos ttl = Nanos(1s),
                                      std::uint32_t capacity = 1) {
    AcquireRequest r = req(name, t, ttl, capacity);
    r.wait_deadline = clock_.now() + wait;
    return table_.acquire(r);
  }
  LockInfo info(std::string_view name) { return table_.describe(name).value(); }
  std::size_t granted_events(std::vector<Event>* out = nullptr) {
    std::size_t n = 0;
    for (Event& e : table_.take_events()) {
      if (e.kind == Event::Kind::granted) {
        ++n;
        if (out) out->push_back(e);
      }
    }
    return n;
  }

  std::vector<OwnerToken> snapshot_holders(std::string_view name) {
    std::vector<OwnerToken> out;
    for (const LeaseRecord& r : table_.snapshot_leases()) {
      if (r.name == name) out.push_back(r.token);
    }
    return out;
  }

  ManualClock clock_;
  LockTable table_{clock_};
  std::uint64_t next_ = 0;
};

}  // namespace baton::core

#endif  // BATON_TESTS_UNIT_LOCK_TABLE_FIXTURE_H_
