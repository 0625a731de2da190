// conformance/conformance.cc — the fixture behind every store's suite.
#include "baton/conformance.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

namespace baton::conformance {

// Each suite file registers its tests from its own static initializers.
// A program links the kit as an archive and refers only to this file
// (its INSTANTIATE_* line calls store_under_test): these references make
// the linker take every suite file along, without --whole-archive.
extern int kLinkSuiteAdvanced, kLinkSuiteBasic, kLinkSuiteCancel,
    kLinkSuiteEnded, kLinkSuiteShared, kLinkSuiteSecrets, kLinkSuiteObserver,
    kLinkSuiteWatch;
int suites_linked() {
  return kLinkSuiteAdvanced + kLinkSuiteBasic + kLinkSuiteCancel +
         kLinkSuiteEnded + kLinkSuiteShared + kLinkSuiteSecrets +
         kLinkSuiteObserver + kLinkSuiteWatch;
}

StoreUnderTest store_under_test(std::string name, ClientFactory open,
                                StoreTraits traits) {
  return StoreUnderTest{std::move(name), std::move(open), std::move(traits)};
}

ClientFactory url_factory(std::string url) {
  return [url](const ClientOptions& options) {
    return Client::open(url, options);
  };
}

ClientFactory store_factory(
    std::function<Result<std::shared_ptr<Store>>()> make) {
  struct Shared {
    std::mutex mu;
    std::function<Result<std::shared_ptr<Store>>()> make;
    std::shared_ptr<Store> store;  // guarded by mu
  };
  auto shared = std::make_shared<Shared>();
  shared->make = std::move(make);
  return [shared](const ClientOptions& options) -> Result<Client> {
    std::lock_guard<std::mutex> lk(shared->mu);
    if (!shared->store) {
      auto s = shared->make();
      if (!s.ok()) return std::move(s).error();
      shared->store = std::move(*s);
    }
    return Client::wrap(shared->store, options);
  };
}

namespace {
ClientOptions test_options() {
  ClientOptions o;
  o.retry_interval = std::chrono::milliseconds{20};
  return o;
}
}  // namespace

void ConformanceTest::SetUp() {
  auto c = GetParam().open(test_options());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  client_.emplace(std::move(*c));
  static std::atomic<int> seq{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  prefix_ = std::string("conf/") + info->name() + "/" +
            OwnerToken::random().to_string().substr(0, 8) + "-" +
            std::to_string(seq.fetch_add(1)) + "/";
}

const std::string* ConformanceTest::unsupported_reason(
    const std::string& rule) const {
  const auto& u = GetParam().traits.unsupported;
  auto it = u.find(rule);
  return it == u.end() ? nullptr : &it->second;
}

Client ConformanceTest::open_client(ClientOptions options) const {
  if (options.retry_interval == ClientOptions{}.retry_interval) {
    options.retry_interval = std::chrono::milliseconds{20};
  }
  auto c = GetParam().open(options);
  if (!c.ok()) {
    ADD_FAILURE() << "opening a second client: " << c.error().to_string();
    return *client_;
  }
  return std::move(*c);
}

std::string ConformanceTest::lock_name(const std::string& suffix) const {
  return prefix_ + suffix;
}

}  // namespace baton::conformance
