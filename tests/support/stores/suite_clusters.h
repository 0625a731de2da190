// tests/support/stores/suite_clusters.h — one StoreCluster per store kind
// for a gtest suite: started on the first test that asks for it, in a
// temp directory of its own, and stopped (its directory removed) when the
// suite ends. Start each server once per test binary, not per test.
//
//   class MySuite : public ::testing::TestWithParam<std::string> {
//     static void TearDownTestSuite() { clusters_.clear(); }
//     void SetUp() override {
//       StoreOptions o; o.kind = GetParam(); ...
//       cluster_ = clusters_.get(o, "/tmp/baton-my-suite-XXXXXX", &why);
//       ASSERT_NE(cluster_, nullptr) << why;
//     }
//     static inline SuiteClusters clusters_;
//   };
#ifndef BATON_TESTS_SUPPORT_STORES_SUITE_CLUSTERS_H_
#define BATON_TESTS_SUPPORT_STORES_SUITE_CLUSTERS_H_

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tests/support/stores/store_cluster.h"

namespace baton::testing {

class SuiteClusters {
 public:
  // The cluster of o.kind, started now with `o` if it is not running yet
  // (in a directory made from the mkdtemp template `dir_template`).
  // nullptr + *why (the same reason on every later call) if it could not
  // be started.
  StoreCluster* get(const StoreOptions& o, const std::string& dir_template,
                    std::string* why) {
    auto& s = started_[o.kind];
    if (!s) {
      s = std::make_unique<Started>();
      std::string tmpl = dir_template;
      if (::mkdtemp(tmpl.data()) == nullptr) {
        s->error = "mkdtemp " + dir_template + " failed";
      } else {
        s->dir = tmpl;
        s->cluster = StoreCluster::start(o, s->dir, &s->error);
      }
    }
    *why = s->error;
    return s->cluster.get();
  }
  // Stops every cluster (TearDownTestSuite).
  void clear() { started_.clear(); }

 private:
  struct Started {
    std::string dir;
    std::string error;
    std::unique_ptr<StoreCluster> cluster;
    ~Started() {
      cluster.reset();
      if (!dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    }
  };
  std::map<std::string, std::unique_ptr<Started>> started_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_STORES_SUITE_CLUSTERS_H_
