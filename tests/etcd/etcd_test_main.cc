// tests/etcd/etcd_test_main.cc — main() of etcd_store_test. Run as
//
//   etcd_store_test --hold-and-stop URL NAME
//
// it is the holder process of EtcdFault.StoppedHolderProcessLosesTheLock
// ToAWaiter (a fresh exec of this binary): it acquires NAME with a 2 s TTL,
// prints the fencing token on stdout and SIGSTOPs itself; the test kills
// it. Any other arguments run the tests.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "baton/client.h"

namespace {

int hold_and_stop(const char* url, const char* name) {
  auto c = baton::Client::open(url);
  if (!c.ok()) {
    std::fprintf(stderr, "hold-and-stop: %s\n", c.error().to_string().c_str());
    return 2;
  }
  baton::AcquireOptions o;
  o.ttl = std::chrono::seconds(2);
  o.label = "stopped-child";
  auto lease = c->acquire(name, std::chrono::seconds(30), o);
  if (!lease.ok()) {
    std::fprintf(stderr, "hold-and-stop: %s\n",
                 lease.error().to_string().c_str());
    return 3;
  }
  std::printf("%llu\n", static_cast<unsigned long long>(lease->fencing_token));
  std::fflush(stdout);
  ::raise(SIGSTOP);  // every thread stops: no keep-alive, no renewal
  for (;;) ::pause();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--hold-and-stop") == 0) {
    return hold_and_stop(argv[2], argv[3]);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
