// tests/server/journal_shared_test.cc — journal records of shared leases
// (rule 18). Part of server_journal_test.
#include <gtest/gtest.h>

#include "journal_test_util.h"
#include "server/journal.h"

namespace baton::server {
namespace {

// Rule 18: a shared lease keeps its mode across a restart; an exclusive
// record stays byte-identical to the format before shared mode.
TEST(JournalRecords, SharedLeasesKeepTheirMode) {
  core::LeaseRecord s1 = lease("rw", 21, 5000);
  s1.shared = true;
  s1.aliases.clear();
  core::LeaseRecord s2 = s1;
  s2.token = OwnerToken{22, 99};
  s2.fencing_token = 22;
  core::LeaseRecord x = lease("x", 23, 5000);
  const std::string plain = encode_lease_put(x);
  EXPECT_EQ(encode_lease_put(s1).size(),
            encode_lease_put(lease("rw", 21, 5000)).size() - 16 + 1);
  DurableState st;
  EXPECT_TRUE(
      scan_records(encode_lease_put(s1) + encode_lease_put(s2) + plain, &st)
          .empty());
  ASSERT_EQ(st.leases.size(), 3u);
  int shared = 0;
  for (const auto& [key, r] : st.leases) shared += r.shared ? 1 : 0;
  EXPECT_EQ(shared, 2);
  EXPECT_FALSE(st.leases.at({"x", OwnerToken{23, 99}}).shared);
}

}  // namespace
}  // namespace baton::server
