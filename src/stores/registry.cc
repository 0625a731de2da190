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

// Options that are off are not defined at all.
#ifndef BATON_WITH_SERVER
#define BATON_WITH_SERVER 0
#endif
#ifndef BATON_WITH_POSTGRES
#define BATON_WITH_POSTGRES 0
#endif
#ifndef BATON_WITH_REDIS
#define BATON_WITH_REDIS 0
#endif
#ifndef BATON_WITH_ZOOKEEPER
#define BATON_WITH_ZOOKEEPER 0
#endif
#ifndef BATON_WITH_MYSQL
#define BATON_WITH_MYSQL 0
#endif
#ifndef BATON_WITH_ETCD
#define BATON_WITH_ETCD 0
#endif
#ifndef BATON_WITH_SQLITE
#define BATON_WITH_SQLITE 0
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

// A store known to the project: its scheme, how it is written, the build
// option that compiles it in and whether this build has it.
struct KnownStore {
  const char* scheme;
  const char* spelled;
  const char* option;
  bool built;
};

constexpr KnownStore kKnown[] = {
    {"baton", "baton://", "BATON_WITH_SERVER", BATON_WITH_SERVER != 0},
    {"batons", "batons://", "BATON_WITH_SERVER", BATON_WITH_SERVER != 0},
    {"postgres", "postgres://", "BATON_WITH_POSTGRES",
     BATON_WITH_POSTGRES != 0},
    {"postgresql", "postgresql://", "BATON_WITH_POSTGRES",
     BATON_WITH_POSTGRES != 0},
    {"redis", "redis://", "BATON_WITH_REDIS", BATON_WITH_REDIS != 0},
    {"rediss", "rediss://", "BATON_WITH_REDIS", BATON_WITH_REDIS != 0},
    {"redlock", "redlock://", "BATON_WITH_REDIS", BATON_WITH_REDIS != 0},
    {"zookeeper", "zookeeper://", "BATON_WITH_ZOOKEEPER",
     BATON_WITH_ZOOKEEPER != 0},
    {"zk", "zk://", "BATON_WITH_ZOOKEEPER", BATON_WITH_ZOOKEEPER != 0},
    {"mysql", "mysql://", "BATON_WITH_MYSQL", BATON_WITH_MYSQL != 0},
    {"mariadb", "mariadb://", "BATON_WITH_MYSQL", BATON_WITH_MYSQL != 0},
    {"etcd", "etcd://", "BATON_WITH_ETCD", BATON_WITH_ETCD != 0},
    {"sqlite", "sqlite://", "BATON_WITH_SQLITE", BATON_WITH_SQLITE != 0},
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

std::vector<std::string> builtin_schemes() {
  std::vector<std::string> out = {"memory:"};
  for (const auto& k : kKnown) {
    if (k.built) out.emplace_back(k.spelled);
  }
  return out;
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
