// tests/server/batond_watch_test.cc — LOCK.WATCH on the wire, against the
// conformance_baton binary's batond (baton_test_server.h): bad input is
// refused naming the problem, a user watches only what it may list, and
// the long poll answers :1 for a change (also one made between two
// watches) and :0 when its wait runs out.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "baton_test_server.h"
#include "raw_resp.h"

namespace baton::testing {
namespace {

using proto::Reply;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

const std::string kTok1 = "0123456789abcdef0123456789abcdef";

void auth(Raw& c, const std::string& user, const std::string& password) {
  EXPECT_EQ(c.call({"AUTH", user, password}).str, "OK");
}

// An error reply whose text starts with `start`.
void expect_error(const Reply& r, const std::string& start) {
  EXPECT_EQ(r.type, Reply::Type::error) << r.str;
  EXPECT_EQ(r.str.rfind(start, 0), 0u) << r.str;
}

void expect_changed(const Reply& r, std::int64_t want) {
  ASSERT_EQ(r.type, Reply::Type::integer) << r.str;
  EXPECT_EQ(r.integer, want);
}

TEST(BatondWatch, BadInputIsRefusedNamingTheProblem) {
  Raw c(test_server().port());
  auth(c, "admin", kAdminPassword);
  expect_error(c.call({"LOCK.WATCH", std::string("bad\0x", 5), "0"}),
               "invalid_argument ");
  expect_error(c.call({"LOCK.WATCH", "w/", "soon"}),
               "invalid_argument wait_ms must be an integer, got \"soon\"");
  expect_error(c.call({"LOCK.WATCH", "w/", "-1"}),
               "invalid_argument wait_ms -1 is out of range (0..604800000)");
  expect_error(c.call({"LOCK.WATCH", "w/", "604800001"}),
               "invalid_argument wait_ms 604800001 is out of range");
  expect_error(c.call({"LOCK.WATCH", "w/"}),
               "invalid_argument wrong number of arguments for LOCK.WATCH");
  expect_error(c.call({"LOCK.WATCH", std::string(513, 'n'), "0"}),
               "invalid_argument ");
  // The connection still serves after the refusals.
  expect_changed(c.call({"LOCK.WATCH", "w/", "0"}), 0);
}

TEST(BatondWatch, AUserWatchesOnlyWhatItMayList) {
  Raw jobs(test_server().port());
  auth(jobs, "jobs", kJobsPassword);
  const Reply r = jobs.call({"LOCK.WATCH", "other/", "0"});
  expect_error(r,
               "permission_denied user \"jobs\" may not run LOCK.WATCH on "
               "\"other/\": no read permission");
  // Its own prefix, and a wider one (as LOCK.LIST "": filtered there).
  Raw jobs2(test_server().port());
  auth(jobs2, "jobs", kJobsPassword);
  expect_changed(jobs2.call({"LOCK.WATCH", "jobs/", "0"}), 0);
  Raw jobs3(test_server().port());
  auth(jobs3, "jobs", kJobsPassword);
  expect_changed(jobs3.call({"LOCK.WATCH", "", "0"}), 0);
}

TEST(BatondWatch, LongPollAnswersAChangeAndNotLosesOne) {
  Raw w(test_server().port());
  auth(w, "admin", kAdminPassword);
  Raw locker(test_server().port());
  auth(locker, "admin", kAdminPassword);
  expect_changed(w.call({"LOCK.WATCH", "wt/", "0"}), 0);  // armed

  // Nothing changes: the wait runs out.
  auto start = steady_clock::now();
  expect_changed(w.call({"LOCK.WATCH", "wt/", "300"}), 0);
  EXPECT_GE(steady_clock::now() - start, 250ms);

  // A parked watch answers a grant made meanwhile.
  w.send({"LOCK.WATCH", "wt/", "4000"});
  std::this_thread::sleep_for(100ms);
  start = steady_clock::now();
  ASSERT_EQ(locker.call({"LOCK.ACQUIRE", "wt/a", kTok1, "30000"}).type,
            Reply::Type::array);
  auto r = w.read();
  ASSERT_TRUE(r.has_value());
  expect_changed(*r, 1);
  EXPECT_LT(steady_clock::now() - start, 2s);

  // A change made while no watch was parked answers the next one at once.
  ASSERT_EQ(locker.call({"LOCK.RELEASE", "wt/a", kTok1}).type,
            Reply::Type::array);
  start = steady_clock::now();
  expect_changed(w.call({"LOCK.WATCH", "wt/", "4000"}), 1);
  EXPECT_LT(steady_clock::now() - start, 2s);
}

}  // namespace
}  // namespace baton::testing
