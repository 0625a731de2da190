// tests/server/journal_test_util.h — what the journal tests share.
#ifndef BATON_TESTS_SERVER_JOURNAL_TEST_UTIL_H_
#define BATON_TESTS_SERVER_JOURNAL_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "server/journal.h"

namespace baton::server {

// A lease record as the journal tests write it.
inline core::LeaseRecord lease(std::string name, std::uint64_t fencing,
                               std::int64_t expiry_ms) {
  core::LeaseRecord r;
  r.name = std::move(name);
  r.token = OwnerToken{fencing, 99};
  r.fencing_token = fencing;
  r.ttl = std::chrono::seconds(30);
  r.expiry = wall_expiry(expiry_ms);
  r.label = "host:1:test";
  r.aliases = {OwnerToken{5, 6}};
  return r;
}

}  // namespace baton::server

#endif  // BATON_TESTS_SERVER_JOURNAL_TEST_UTIL_H_
