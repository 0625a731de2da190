#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "baton/lease.h"

namespace baton {
namespace {

TEST(OwnerToken, RandomIsUniqueAndNonZero) {
  std::set<OwnerToken> seen;
  for (int i = 0; i < 1000; ++i) {
    OwnerToken t = OwnerToken::random();
    EXPECT_FALSE(t.is_zero());
    EXPECT_TRUE(seen.insert(t).second);
  }
}

TEST(OwnerToken, ForkedChildDoesNotRepeatParentTokens) {
  // Leave buffered tokens in this thread, then fork: the child must not
  // hand out the bytes the parent still has buffered.
  (void)OwnerToken::random();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    OwnerToken t[4];
    for (auto& x : t) x = OwnerToken::random();
    ssize_t n = ::write(fds[1], t, sizeof t);
    ::_exit(n == static_cast<ssize_t>(sizeof t) ? 0 : 1);
  }
  ::close(fds[1]);
  OwnerToken mine[4];
  for (auto& x : mine) x = OwnerToken::random();
  OwnerToken theirs[4];
  std::size_t got = 0;
  while (got < sizeof theirs) {
    ssize_t n = ::read(fds[0], reinterpret_cast<char*>(theirs) + got,
                       sizeof theirs - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_EQ(got, sizeof theirs);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (const auto& a : mine) {
    for (const auto& b : theirs) EXPECT_NE(a, b);
  }
}

TEST(OwnerToken, ParseAndPrint) {
  OwnerToken t{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(t.to_string(), "0123456789abcdeffedcba9876543210");
  auto p = OwnerToken::parse("0123456789ABCDEFfedcba9876543210");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, t);
  OwnerToken r = OwnerToken::random();
  EXPECT_EQ(OwnerToken::parse(r.to_string()).value(), r);
  EXPECT_EQ(OwnerToken{}.to_string(), std::string(32, '0'));
}

TEST(OwnerToken, ParseRejectsBadInput) {
  for (const char* bad :
       {"", "abc", "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0", "0123456789abcdeg0123456789abcdef",
        " 123456789abcdef0123456789abcdef"}) {
    auto p = OwnerToken::parse(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().code(), Errc::invalid_argument);
    EXPECT_NE(p.error().message().find("owner token"), std::string::npos);
  }
}

TEST(Lease, TimeLeft) {
  Lease l;
  EXPECT_EQ(l.time_left(), std::chrono::milliseconds{0});
  EXPECT_FALSE(l.valid_now());
  l.local_deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  EXPECT_TRUE(l.valid_now());
  EXPECT_GT(l.time_left(), std::chrono::milliseconds{9000});
  EXPECT_LE(l.time_left(), std::chrono::milliseconds{10000});
}

}  // namespace
}  // namespace baton
