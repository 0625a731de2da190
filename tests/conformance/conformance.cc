// tests/conformance/conformance.cc — the fixture behind every store's suite.
#include "conformance.h"

#include <atomic>
#include <chrono>

namespace baton::conformance {

ClientFactory url_factory(std::string url) {
  return [url](const ClientOptions& options) {
    return Client::open(url, options);
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
