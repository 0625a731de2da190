// baton/conformance.h — the conformance kit: the whole lock contract
// (docs/contract.md) as one GoogleTest suite, instantiated once per store.
// Link the target baton::conformance (find_package(baton COMPONENTS
// conformance); it brings GoogleTest) and instantiate it at namespace
// scope:
//
//   INSTANTIATE_CONFORMANCE(Memory, baton::conformance::url_factory(
//                                       "memory:conformance"));
//   INSTANTIATE_CONFORMANCE(Mine, baton::conformance::store_factory(store),
//                           traits);  // a Store of your own (baton/store.h)
//
// Every built-in store of baton runs this same suite against a real server
// started on loopback; a store written outside this repository is proven
// the same way.
//
// The factory is called once per test (and again when a test needs a second,
// independent client); every Client it returns must reach the *same* store.
// Tests use lock names unique to the test run, so a store may keep state
// between tests. A store that cannot keep a rule marks it in StoreTraits
// with the reason; the test then reports GTEST_SKIP() << reason.
//
// Keys for StoreTraits::unsupported: "rule1" .. "rule17", "counters",
// "election", "cancel" (AcquireOptions::stop), "shared" (rule 18,
// acquire_shared; the suite checks the store refuses it with
// `unsupported`), "subsecond_ttl" (the store keeps a lease of a TTL under
// 1 s longer than asked, up to a whole second: the holder's deadline
// follows the TTL, the store's expiry does not).
#ifndef BATON_CONFORMANCE_H_
#define BATON_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "baton/client.h"
#include "baton/store.h"

namespace baton::conformance {

using ClientFactory = std::function<Result<Client>(const ClientOptions&)>;

struct StoreTraits {
  // rule key -> why this store cannot keep it.
  std::map<std::string, std::string> unsupported;
  // Divides the operation counts of the suite's stress loops (rule 1's 16
  // threads x 1000 operations). 1: the full count. See repeated().
  int stress_divisor = 1;
};

// `traits` for an instantiation that repeats store code another
// instantiation runs at the full count: the same store over TLS, with
// credentials or on more servers. Its stress loops run a quarter of the
// operations (16 x 250 on rule 1, still contended on four locks); every
// other test runs unchanged. On the replicated and TLS runs that loop was
// most of the binary's time (33 of 51 s on a 3-member etcd cluster).
inline StoreTraits repeated(StoreTraits traits = {}) {
  traits.stress_divisor = 4;
  return traits;
}

struct StoreUnderTest {
  std::string name;
  ClientFactory open;
  StoreTraits traits;
};

inline void PrintTo(const StoreUnderTest& s, std::ostream* os) {
  *os << s.name;
}

// (Defined in the kit's library: every INSTANTIATE_* line refers to it,
// which is what links the suite's tests into the program.)
StoreUnderTest store_under_test(std::string name, ClientFactory open,
                                StoreTraits traits = {});

// A factory opening `url` with the options the test asks for.
ClientFactory url_factory(std::string url);
// A factory of clients of one store object (baton/store.h): every client
// of the run reaches `store`. `make` is called once, on first use.
ClientFactory store_factory(
    std::function<Result<std::shared_ptr<Store>>()> make);

class ConformanceTest : public ::testing::TestWithParam<StoreUnderTest> {
 protected:
  void SetUp() override;

  // Why the store cannot keep `rule`, or nullptr (see BATON_REQUIRE).
  const std::string* unsupported_reason(const std::string& rule) const;
  // A second, independent client of the same store.
  Client open_client(ClientOptions options = {}) const;
  // A lock name unique to this test and run: "<test>/<run id>/<suffix>".
  std::string lock_name(const std::string& suffix) const;
  // Prefix shared by every name of this test.
  const std::string& prefix() const { return prefix_; }

  Client& client() { return *client_; }

 private:
  std::optional<Client> client_;
  std::string prefix_;
};

// A second suite, EndedLeaseTest (suite_ended.cc): what a store says about
// a lease that ended (describe's last_fencing of a free lock, a late
// duplicate acquire refused with lock_lost; docs/design.md). Only the stores
// built on core::LockTable keep these today (memory:, baton://); another
// store instantiates it once it does:
//
//   INSTANTIATE_ENDED_LEASE_SUITE(Memory, url_factory("memory:conformance"));
class EndedLeaseTest : public ConformanceTest {};

}  // namespace baton::conformance

// First statement of a test of `rule`: skips it, with the store's reason,
// if the store marks the rule unsupported.
#define BATON_REQUIRE(rule)                                              \
  do {                                                                   \
    if (const std::string* why_ = unsupported_reason(rule)) {            \
      GTEST_SKIP() << (rule) << " is not kept by this store: " << *why_; \
    }                                                                    \
  } while (0)

// INSTANTIATE_CONFORMANCE(Name, factory [, traits]) — at namespace scope.
#define INSTANTIATE_CONFORMANCE(Name, ...)                                    \
  namespace baton::conformance {                                              \
  INSTANTIATE_TEST_SUITE_P(                                                   \
      Name, ConformanceTest,                                                  \
      ::testing::Values(::baton::conformance::store_under_test(#Name,         \
                                                               __VA_ARGS__)), \
      [](const auto& param_info_) { return param_info_.param.name; });        \
  }

// INSTANTIATE_ENDED_LEASE_SUITE(Name, factory [, traits]) — at namespace
// scope.
#define INSTANTIATE_ENDED_LEASE_SUITE(Name, ...)                              \
  namespace baton::conformance {                                              \
  INSTANTIATE_TEST_SUITE_P(                                                   \
      Name, EndedLeaseTest,                                                   \
      ::testing::Values(::baton::conformance::store_under_test(#Name,         \
                                                               __VA_ARGS__)), \
      [](const auto& param_info_) { return param_info_.param.name; });        \
  }

#endif  // BATON_CONFORMANCE_H_
