// stores/registry.cc — the URL → Store factory table.
#include "stores/registry.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "stores/memory/memory_store.h"
#if BATON_WITH_SERVER
#include "stores/baton/baton_store.h"
#endif
#if BATON_WITH_POSTGRES
#include "stores/postgres/postgres_store.h"
#endif
#if BATON_WITH_REDIS
#include "stores/redis/redis_store.h"
#include "stores/redis/redlock_store.h"
#endif
#if BATON_WITH_ZOOKEEPER
#include "stores/zookeeper/zookeeper_store.h"
#endif
#if BATON_WITH_MYSQL
#include "stores/mysql/mysql_store.h"
#endif
#if BATON_WITH_ETCD
#include "stores/etcd/etcd_store.h"
#endif
#if BATON_WITH_SQLITE
#include "stores/sqlite/sqlite_store.h"
#endif

namespace baton::store {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, Factory> extra;  // guarded by mu
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed (used at exit)
  return *r;
}

// A store known to the project: its scheme, how it is written and the build
// option that compiles it in.
struct KnownStore {
  const char* scheme;
  const char* spelled;
  const char* option;
};

constexpr KnownStore kKnown[] = {
    {"baton", "baton://", "BATON_WITH_SERVER"},
    {"batons", "batons://", "BATON_WITH_SERVER"},
    {"postgres", "postgres://", "BATON_WITH_POSTGRES"},
    {"postgresql", "postgresql://", "BATON_WITH_POSTGRES"},
    {"redis", "redis://", "BATON_WITH_REDIS"},
    {"rediss", "rediss://", "BATON_WITH_REDIS"},
    {"redlock", "redlock://", "BATON_WITH_REDIS"},
    {"zookeeper", "zookeeper://", "BATON_WITH_ZOOKEEPER"},
    {"zk", "zk://", "BATON_WITH_ZOOKEEPER"},
    {"mysql", "mysql://", "BATON_WITH_MYSQL"},
    {"mariadb", "mariadb://", "BATON_WITH_MYSQL"},
    {"etcd", "etcd://", "BATON_WITH_ETCD"},
    {"sqlite", "sqlite://", "BATON_WITH_SQLITE"},
};

// The stores compiled into this binary.
Result<std::unique_ptr<Store>> open_builtin(const Url& url, bool* found) {
  *found = true;
  if (url.scheme == "memory") return open_memory_store(url);
#if BATON_WITH_SERVER
  if (url.scheme == "baton" || url.scheme == "batons") {
    return open_baton_store(url);
  }
#endif
#if BATON_WITH_POSTGRES
  if (url.scheme == "postgres" || url.scheme == "postgresql") {
    return open_postgres_store(url);
  }
#endif
#if BATON_WITH_REDIS
  if (url.scheme == "redis" || url.scheme == "rediss") {
    return open_redis_store(url);
  }
  if (url.scheme == "redlock") return open_redlock_store(url);
#endif
#if BATON_WITH_ZOOKEEPER
  if (url.scheme == "zookeeper" || url.scheme == "zk") {
    return open_zookeeper_store(url);
  }
#endif
#if BATON_WITH_MYSQL
  if (url.scheme == "mysql" || url.scheme == "mariadb") {
    return open_mysql_store(url);
  }
#endif
#if BATON_WITH_ETCD
  if (url.scheme == "etcd") return open_etcd_store(url);
#endif
  *found = false;
  return Error(Errc::internal, "no built-in store");
}

}  // namespace

bool register_store(std::string scheme, Factory factory) {
  if (scheme.empty() || !factory) return false;
  for (auto& c : scheme) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.extra[std::move(scheme)] = std::move(factory);
  return true;
}

Result<std::unique_ptr<Store>> open_store(std::string_view url) {
#if BATON_WITH_SQLITE
  // sqlite:///abs/path.db and sqlite://./rel.db are file paths, not
  // host:port authorities: the store parses its own URL.
  if (url.size() >= 7 &&
      (url.substr(0, 7) == "sqlite:" || url.substr(0, 7) == "SQLITE:")) {
    return open_sqlite_store(url);
  }
#endif
  auto parsed = core::parse_url(url);
  if (!parsed.ok()) return std::move(parsed).error();
  const Url& u = *parsed;

  Factory extra;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    auto it = r.extra.find(u.scheme);
    if (it != r.extra.end()) extra = it->second;
  }
  if (extra) return extra(u);

  bool found = false;
  auto store = open_builtin(u, &found);
  if (found) return store;

  for (const auto& k : kKnown) {
    if (u.scheme == k.scheme) {
      return Error(Errc::invalid_argument,
                   std::string("store \"") + k.spelled +
                       "\" is not built into this binary (configure with -D" +
                       k.option + "=ON)");
    }
  }
  return Error(Errc::invalid_argument,
               "store URL \"" + u.safe() + "\" has an unknown scheme \"" +
                   u.scheme +
                   "\" (available: memory:, baton://, batons://, postgres://, "
                   "redis://, rediss://, redlock://, zookeeper://, mysql://, "
                   "etcd://, sqlite://)");
}

}  // namespace baton::store
