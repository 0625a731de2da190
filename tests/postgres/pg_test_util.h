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
#include "core/url.h"
#include "pg_server.h"
#include "stores/postgres/postgres_store.h"

namespace baton::testing {

using namespace std::chrono_literals;

inline std::shared_ptr<store::Store> open_pg_store(
    const std::string& query = "") {
  auto url = core::parse_url(pg_server().url(query));
  if (!url.ok()) return nullptr;
  auto s = store::open_postgres_store(*url);
  if (!s.ok()) {
    ADD_FAILURE() << s.error().to_string();
    return nullptr;
  }
  return std::shared_ptr<store::Store>(std::move(*s));
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
