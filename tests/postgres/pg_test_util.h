// tests/postgres/pg_test_util.h — opening postgres:// stores and clients on
// the test binary's private server.
#ifndef BATON_TESTS_POSTGRES_PG_TEST_UTIL_H_
#define BATON_TESTS_POSTGRES_PG_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "baton/client.h"
#include "baton/store_descriptor.h"
#include "pg_server.h"
#include "stores/postgres/postgres_store.h"

namespace baton::testing {

using namespace std::chrono_literals;

inline std::shared_ptr<Store> open_pg_store(const std::string& query = "") {
  auto s = open_store(pg_server().url(query));
  if (!s.ok()) {
    ADD_FAILURE() << s.error().to_string();
    return nullptr;
  }
  return std::shared_ptr<Store>(std::move(*s));
}

// The store's settings from a URL, as its open function reads them.
inline Result<store::pg::StoreOptions> pg_settings(
    const std::string& url, store::pg::ConnParams* params, std::string* where) {
  auto parsed = parse_store_url(url, store::postgres_descriptor());
  if (!parsed.ok()) return std::move(parsed).error();
  return store::pg::settings(*parsed, params, where);
}

inline Client pg_client(const std::string& query = "",
                        ClientOptions options = {}) {
  return Client::wrap(open_pg_store(query), std::move(options));
}

inline AcquireOptions ttl_opts(std::chrono::milliseconds ttl,
                               std::string label = {}) {
  AcquireOptions o;
  o.ttl = ttl;
  o.label = std::move(label);
  return o;
}

inline std::string unique_name(const std::string& base) {
  return "pgtest/" + base + "/" + OwnerToken::random().to_string().substr(0, 8);
}

inline bool eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

}  // namespace baton::testing

#endif  // BATON_TESTS_POSTGRES_PG_TEST_UTIL_H_
