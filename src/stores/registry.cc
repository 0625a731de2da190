// stores/registry.cc — the stores built into this binary, the registered
// ones, and baton::open_store() over their descriptors.
#include "stores/registry.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "baton/store_descriptor.h"
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

namespace baton {
namespace {

// A store known to the project: its scheme, how it is written, and the
// build option that compiles it in (named when a URL asks for a store this
// binary was built without).
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
    {"etcds", "etcds://", "BATON_WITH_ETCD"},
    {"sqlite", "sqlite://", "BATON_WITH_SQLITE"},
};

struct Descriptors {
  std::mutex mu;
  std::vector<StoreDescriptor> registered;  // guarded by mu; later wins
};

Descriptors& descriptors() {
  static Descriptors* d = new Descriptors();  // never destroyed (used at exit)
  return *d;
}

// The stores built into this binary that are written to baton/store.h.
std::vector<const StoreDescriptor*> builtin() {
  std::vector<const StoreDescriptor*> out = {&store::memory_descriptor()};
#if BATON_WITH_SERVER
  out.push_back(&store::baton_descriptor());
#endif
#if BATON_WITH_POSTGRES
  out.push_back(&store::postgres_descriptor());
#endif
#if BATON_WITH_REDIS
  out.push_back(&store::redis_descriptor());
  out.push_back(&store::redlock_descriptor());
#endif
#if BATON_WITH_ZOOKEEPER
  out.push_back(&store::zookeeper_descriptor());
#endif
#if BATON_WITH_MYSQL
  out.push_back(&store::mysql_descriptor());
#endif
#if BATON_WITH_ETCD
  out.push_back(&store::etcd_descriptor());
#endif
#if BATON_WITH_SQLITE
  out.push_back(&store::sqlite_descriptor());
#endif
  return out;
}

std::string lower_scheme(std::string_view url) {
  std::string scheme(url.substr(0, url.find(':')));
  for (auto& c : scheme) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return scheme;
}

// The descriptor for `scheme`: registered ones first, then the built-ins.
std::optional<StoreDescriptor> find(const std::string& scheme) {
  {
    Descriptors& d = descriptors();
    std::lock_guard<std::mutex> lk(d.mu);
    for (auto it = d.registered.rbegin(); it != d.registered.rend(); ++it) {
      for (const auto& s : it->schemes) {
        if (s == scheme) return *it;
      }
    }
  }
  for (const StoreDescriptor* b : builtin()) {
    for (const auto& s : b->schemes) {
      if (s == scheme) return *b;
    }
  }
  return std::nullopt;
}

}  // namespace

bool register_store(StoreDescriptor descriptor) {
  if (descriptor.name.empty() || descriptor.schemes.empty() ||
      !descriptor.open) {
    return false;
  }
  for (auto& s : descriptor.schemes) s = lower_scheme(s);
  Descriptors& d = descriptors();
  std::lock_guard<std::mutex> lk(d.mu);
  d.registered.push_back(std::move(descriptor));
  return true;
}

std::vector<StoreDescriptor> store_descriptors() {
  std::vector<StoreDescriptor> out;
  for (const StoreDescriptor* b : builtin()) out.push_back(*b);
  Descriptors& d = descriptors();
  std::lock_guard<std::mutex> lk(d.mu);
  for (const auto& r : d.registered) {
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const auto& o) { return o.name == r.name; });
    if (same != out.end()) {
      *same = r;
    } else {
      out.push_back(r);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Result<std::unique_ptr<Store>> open_store(std::string_view url) {
  if (url.find(':') == std::string_view::npos) {
    return Error(Errc::invalid_argument,
                 "store URL \"" + std::string(url.substr(0, 200)) +
                     "\" has no scheme (e.g. memory:, baton://host:port)");
  }
  if (auto d = find(lower_scheme(url))) {
    auto parsed = parse_store_url(url, *d);
    if (!parsed.ok()) return std::move(parsed).error();
    return d->open(*parsed);
  }
  const std::string scheme = lower_scheme(url);
  for (const auto& k : kKnown) {
    if (scheme == k.scheme) {
      return Error(Errc::invalid_argument,
                   std::string("store \"") + k.spelled +
                       "\" is not built into this binary (configure with -D" +
                       k.option + "=ON)");
    }
  }
  std::string available;
  for (const std::string& s : store::builtin_schemes()) {
    available += (available.empty() ? "" : ", ") + s;
  }
  return Error(Errc::invalid_argument, "store URL has an unknown scheme \"" +
                                           scheme.substr(0, 64) +
                                           "\" (available: " + available + ")");
}

}  // namespace baton

namespace baton::store {

std::vector<std::string> builtin_schemes() {
  std::vector<std::string> out;
  auto add = [&out](const StoreDescriptor& d) {
    for (const std::string& s : d.schemes) {
      // memory: is opaque; every other scheme takes an authority or path.
      std::string spelled =
          d.url_form.find("://") != std::string::npos ? s + "://" : s + ":";
      if (std::find(out.begin(), out.end(), spelled) == out.end()) {
        out.push_back(std::move(spelled));
      }
    }
  };
  for (const StoreDescriptor* b : builtin()) add(*b);
  Descriptors& d = descriptors();
  std::lock_guard<std::mutex> lk(d.mu);
  for (const auto& r : d.registered) add(r);
  return out;
}

}  // namespace baton::store
