// core/token.cc — owner tokens (random, parse, print) and Lease::time_left.
#include <pthread.h>
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "baton/lease.h"

namespace baton {

namespace {

void fill_random(unsigned char* buf, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::getrandom(buf + got, size - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "baton: getrandom failed: %s\n",
                   std::strerror(errno));
      std::abort();
    }
    got += static_cast<std::size_t>(n);
  }
}

// Bumped in a forked child, so no buffered bytes are handed out twice (by
// the parent and the child).
std::atomic<std::uint64_t> g_fork_generation{0};

}  // namespace

// Kernel randomness, fetched 16 tokens at a time per thread (one getrandom
// per 16 acquires instead of one each); every token is still 16 fresh bytes
// from getrandom, never derived or reused.
OwnerToken OwnerToken::random() {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, [] { ++g_fork_generation; });
    return true;
  }();
  (void)registered;
  constexpr std::size_t kTokens = 16;
  thread_local unsigned char pool[16 * kTokens];
  thread_local std::size_t used = kTokens;
  thread_local std::uint64_t generation = 0;
  const std::uint64_t g = g_fork_generation.load(std::memory_order_relaxed);
  if (used == kTokens || generation != g) {
    fill_random(pool, sizeof pool);
    used = 0;
    generation = g;
  }
  unsigned char* buf = pool + 16 * used;
  ++used;
  OwnerToken t;
  for (int i = 0; i < 8; ++i) t.hi = (t.hi << 8) | buf[i];
  for (int i = 8; i < 16; ++i) t.lo = (t.lo << 8) | buf[i];
  std::memset(buf, 0, 16);
  return t;
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

Result<OwnerToken> OwnerToken::parse(std::string_view hex) {
  if (hex.size() != 32) {
    return Error(Errc::invalid_argument,
                 "owner token is " + std::to_string(hex.size()) +
                     " characters; it must be exactly 32 hex digits");
  }
  OwnerToken t;
  for (std::size_t i = 0; i < 32; ++i) {
    int v = hex_value(hex[i]);
    if (v < 0) {
      return Error(Errc::invalid_argument,
                   "owner token has a non-hex character at position " +
                       std::to_string(i + 1));
    }
    std::uint64_t& part = i < 16 ? t.hi : t.lo;
    part = (part << 4) | static_cast<std::uint64_t>(v);
  }
  return t;
}

std::string OwnerToken::to_string() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = kDigits[(hi >> (4 * i)) & 0xF];
    out[31 - i] = kDigits[(lo >> (4 * i)) & 0xF];
  }
  return out;
}

std::chrono::milliseconds Lease::time_left() const noexcept {
  auto left = local_deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) {
    return std::chrono::milliseconds{0};
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(left);
}

}  // namespace baton
