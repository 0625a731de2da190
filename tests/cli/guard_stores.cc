// tests/cli/guard_stores.cc — the stores of cli_guard_test (guard_stores.h).
#include "guard_stores.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "process.h"

namespace baton::testing {

namespace {

using namespace std::chrono_literals;

// One started store and what keeps it running.
struct Started {
  StoreUnderTest store;
  std::string dir;
  std::unique_ptr<StoreCluster> cluster;
  ~Started() {
    if (cluster) {
      std::string ignored;
      cluster->freeze(false, &ignored);  // a test may have left it stopped
    }
    cluster.reset();  // stops every server it started
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

std::mutex mu;
// Never destroyed: the servers are stopped by the environment below, before
// exit, when everything they use still exists.
auto& started = *new std::map<std::string, std::unique_ptr<Started>>();  // mu

class StopStores : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard<std::mutex> lock(mu);
    started.clear();
  }
};
::testing::Environment* const stop_stores =
    ::testing::AddGlobalTestEnvironment(new StopStores);

}  // namespace

const StoreUnderTest* store_under_test(const std::string& kind,
                                       std::string* error) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = started.find(kind);
  if (it != started.end()) return &it->second->store;
  auto s = std::make_unique<Started>();
  s->dir = make_temp_dir();
  StoreOptions options;
  options.kind = kind;
  options.slots = 1;
  options.proxies = false;  // every client reaches the servers directly
  options.lease_ttl = 2s;   // the tests' TTL (zookeeper's session: twice)
  s->cluster = StoreCluster::start(options, s->dir, error);
  if (!s->cluster) return nullptr;
  s->store.name = kind;
  s->store.url = s->cluster->direct_url();
  s->store.cluster = s->cluster.get();
  return &started.emplace(kind, std::move(s)).first->second->store;
}

void stop_store_under_test(const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu);
  started.erase(kind);
}

}  // namespace baton::testing
