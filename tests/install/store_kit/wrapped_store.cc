// tests/install/store_kit/wrapped_store.cc — a store of its own, written
// against the installed public headers only (baton/store.h,
// baton/store_descriptor.h): it forwards every primitive to a sqlite://
// store opened with baton::open_store and counts them, under its own URL
// scheme `wrapped:`. The installed conformance kit then runs the whole
// contract against it.
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "baton/conformance.h"
#include "baton/store.h"
#include "baton/store_descriptor.h"

namespace {

std::atomic<long> g_primitives{0};

class WrappedRequest final : public baton::Request {
 public:
  explicit WrappedRequest(std::unique_ptr<baton::Request> inner)
      : inner_(std::move(inner)) {}
  baton::Result<baton::Answer> ask(baton::AskMode mode,
                                   std::chrono::milliseconds wait_left,
                                   const baton::CallContext& ctx) override {
    ++g_primitives;
    return inner_->ask(mode, wait_left, ctx);
  }
  baton::Result<baton::Answer> look(std::chrono::milliseconds wait_left,
                                    const baton::CallContext& ctx) override {
    ++g_primitives;
    return inner_->look(wait_left, ctx);
  }
  baton::Result<baton::Answer> withdraw(
      const baton::CallContext& ctx) override {
    ++g_primitives;
    return inner_->withdraw(ctx);
  }
  std::optional<baton::Grant> wait_change(
      baton::Clock::time_point until, const baton::CallContext& ctx) override {
    return inner_->wait_change(until, ctx);
  }
  void interrupt() override {
    baton::Request::interrupt();
    inner_->interrupt();
  }

 private:
  std::unique_ptr<baton::Request> inner_;
};

class WrappedMulti final : public baton::MultiRequest {
 public:
  explicit WrappedMulti(std::unique_ptr<baton::MultiRequest> inner)
      : inner_(std::move(inner)) {}
  baton::Result<baton::MultiAnswer> ask(
      baton::AskMode mode, std::chrono::milliseconds wait_left,
      const baton::CallContext& ctx) override {
    ++g_primitives;
    return inner_->ask(mode, wait_left, ctx);
  }
  baton::Result<baton::MultiAnswer> look(
      std::chrono::milliseconds wait_left,
      const baton::CallContext& ctx) override {
    ++g_primitives;
    return inner_->look(wait_left, ctx);
  }
  baton::Result<baton::MultiAnswer> withdraw(
      const baton::CallContext& ctx) override {
    ++g_primitives;
    return inner_->withdraw(ctx);
  }
  std::optional<baton::Grant> wait_change(
      baton::Clock::time_point until, const baton::CallContext& ctx) override {
    return inner_->wait_change(until, ctx);
  }
  void interrupt() override {
    baton::MultiRequest::interrupt();
    inner_->interrupt();
  }

 private:
  std::unique_ptr<baton::MultiRequest> inner_;
};

class WrappedStore final : public baton::Store {
 public:
  explicit WrappedStore(std::unique_ptr<baton::Store> inner)
      : inner_(std::move(inner)) {}

  std::unique_ptr<baton::Request> request(
      const baton::AcquireSpec& spec) override {
    return std::make_unique<WrappedRequest>(inner_->request(spec));
  }
  std::unique_ptr<baton::MultiRequest> request_multi(
      const baton::MultiSpec& spec) override {
    return std::make_unique<WrappedMulti>(inner_->request_multi(spec));
  }
  baton::Result<baton::Grant> extend(std::string_view name,
                                     const baton::OwnerToken& token,
                                     std::chrono::milliseconds ttl,
                                     const baton::CallContext& ctx) override {
    ++g_primitives;
    return inner_->extend(name, token, ttl, ctx);
  }
  baton::Result<baton::ReleaseResult> release(
      std::string_view name, const baton::OwnerToken& token,
      const baton::CallContext& ctx) override {
    ++g_primitives;
    return inner_->release(name, token, ctx);
  }
  baton::Result<baton::LockInfo> describe(
      std::string_view name, const baton::CallContext& ctx) override {
    return inner_->describe(name, ctx);
  }
  baton::Result<std::vector<baton::LockInfo>> list(
      std::string_view prefix, std::size_t limit,
      const baton::CallContext& ctx) override {
    return inner_->list(prefix, limit, ctx);
  }
  baton::Result<std::int64_t> counter_get(
      std::string_view name, const baton::CallContext& ctx) override {
    return inner_->counter_get(name, ctx);
  }
  baton::Result<std::int64_t> counter_add(
      std::string_view name, std::int64_t delta,
      const baton::CallContext& ctx) override {
    return inner_->counter_add(name, delta, ctx);
  }
  baton::Result<std::int64_t> counter_take(
      std::string_view name, std::int64_t n,
      const baton::CallContext& ctx) override {
    return inner_->counter_take(name, n, ctx);
  }
  baton::Result<std::unique_ptr<baton::Waitable>> watch(
      std::string_view prefix, const baton::CallContext& ctx) override {
    return inner_->watch(prefix, ctx);
  }
  bool supports_shared() const override { return inner_->supports_shared(); }
  std::chrono::milliseconds recheck_interval() const override {
    return inner_->recheck_interval();
  }
  std::string safe_url() const override {
    return "wrapped+" + inner_->safe_url();
  }

 private:
  std::unique_ptr<baton::Store> inner_;
};

// The database lives in a directory made for this run (in memory where
// /dev/shm exists: the kit checks the contract's meaning, not the disk),
// removed at exit.
const std::string& db_dir() {
  static const std::string dir = [] {
    std::string tmpl = std::filesystem::is_directory("/dev/shm")
                           ? "/dev/shm/baton-store-kit-XXXXXX"
                           : "/tmp/baton-store-kit-XXXXXX";
    const char* d = mkdtemp(tmpl.data());
    return std::string(d == nullptr ? "/tmp" : d);
  }();
  static const struct Cleanup {
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup;
  return dir;
}

// The store registered under its own scheme, opened by URL like any other.
const bool registered = [] {
  baton::StoreDescriptor d;
  d.name = "wrapped";
  d.schemes = {"wrapped"};
  d.summary = "sqlite:// behind a counting wrapper";
  d.url_form = "wrapped:<database name>";
  d.hosts_required = false;
  d.options = {baton::request_timeout_option()};
  d.open = [](const baton::StoreUrl& url)
      -> baton::Result<std::unique_ptr<baton::Store>> {
    auto inner = baton::open_store(
        "sqlite://" + db_dir() + "/" + url.opaque + ".db?request_timeout=" +
        std::to_string(url.options.duration("request_timeout").count()) + "ms");
    if (!inner.ok()) return std::move(inner).error();
    return std::unique_ptr<baton::Store>(
        std::make_unique<WrappedStore>(std::move(*inner)));
  };
  return baton::register_store(std::move(d));
}();

// A unit of its own: the wrapper was registered and really used.
TEST(StoreKit, TheWrapperIsRegisteredAndCarriesTheCalls) {
  ASSERT_TRUE(registered);
  auto client = baton::Client::open("wrapped:probe");
  ASSERT_TRUE(client.ok()) << client.error().to_string();
  const long before = g_primitives.load();
  auto lease = client->try_acquire("probe");
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  EXPECT_TRUE(client->release(*lease).ok());
  EXPECT_GE(g_primitives.load() - before, 2);
  EXPECT_EQ(client->url().rfind("wrapped+sqlite://", 0), 0u) << client->url();
}

}  // namespace

INSTANTIATE_CONFORMANCE(Wrapped,
                        baton::conformance::url_factory("wrapped:conformance"));
