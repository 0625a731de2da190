// tests/zookeeper/zk_test_util.h — what zookeeper_store_test's files share:
// the binary's one ZooKeeper server, lock names, the store's node layout
// (src/stores/zookeeper/zookeeper_store.h, docs/stores/zookeeper.md) and a
// ZooKeeper C client (sync API) to look at the nodes the store wrote.
//
// Layout tested against: root = the URL path (default /baton); lock L is
// <root>/locks/<esc(L)>, each request an ephemeral sequential child
// q-<token>-<capacity>-<kind>-<seq>, with data lines key=value (st, ttl,
// holds, f, rk, al, and label last); counters under <root>/counters.
#ifndef BATON_TESTS_ZOOKEEPER_ZK_TEST_UTIL_H_
#define BATON_TESTS_ZOOKEEPER_ZK_TEST_UTIL_H_

#ifndef THREADED
#define THREADED  // the C client's sync API (libzookeeper_mt)
#endif
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "zk_process.h"

namespace baton::testing {

using namespace std::chrono_literals;

// The server of this test binary, started on first use (from the main
// thread) and stopped at exit.
inline ZkProcess& shared_server() {
  static ZkProcess* server = nullptr;
  if (server == nullptr) {
    server = new ZkProcess();
    std::atexit([] { delete server; });
  }
  return *server;
}

// The root (chroot) of ZkProcess::url().
inline constexpr const char* kTestRoot = "/baton-test";

inline std::string unique(const std::string& base) {
  return "zk-test/" + base + "/" +
         OwnerToken::random().to_string().substr(0, 12);
}

inline AcquireOptions opts(std::chrono::milliseconds ttl,
                           std::string label = {}) {
  AcquireOptions o;
  o.ttl = ttl;
  o.label = std::move(label);
  return o;
}

// Runs `f` when it goes out of scope (joins threads after a failed ASSERT).
class Finally {
 public:
  explicit Finally(std::function<void()> f) : f_(std::move(f)) {}
  ~Finally() { f_(); }
  Finally(const Finally&) = delete;
  Finally& operator=(const Finally&) = delete;

 private:
  std::function<void()> f_;
};

inline bool eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds limit = 10s,
                       std::chrono::milliseconds every = 5ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(every);
  }
  return cond();
}

// The store's escape of a name in a node path: every byte outside
// [A-Za-z0-9_-] as %XX, upper-case hex.
inline std::string esc(const std::string& name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : name) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
        (c >= '0' && c <= '9') || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

inline std::string lock_dir(const std::string& name,
                            const std::string& root = kTestRoot) {
  return root + "/locks/" + esc(name);
}

// A node's data, key=value per line, in order.
using NodeData = std::vector<std::pair<std::string, std::string>>;
inline NodeData parse_node_data(const std::string& data) {
  NodeData out;
  std::istringstream in(data);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      out.emplace_back(line, "");
    } else {
      out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    }
  }
  return out;
}
inline std::string field(const NodeData& d, const std::string& key) {
  for (const auto& [k, v] : d) {
    if (k == key) return v;
  }
  return "<absent>";
}

// A session id as the four-letter words print it ("0x" + lower-case hex).
inline std::string session_hex(std::int64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(id));
  return buf;
}

// `wchp` output (a path line, then one "\t0x<session>" line per watcher;
// data and child watches listed apart) as path -> watching sessions.
inline std::map<std::string, std::set<std::string>> watchers_by_path(
    const std::string& wchp) {
  std::map<std::string, std::set<std::string>> out;
  std::istringstream in(wchp);
  std::string line, path;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '/') {
      path = line;
      out[path];
    } else if (const auto at = line.find("0x");
               at != std::string::npos && !path.empty()) {
      std::string id = line.substr(at);
      while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back())))
        id.pop_back();
      out[path].insert(id);
    }
  }
  return out;
}

// Watches on the server, from four-letter words: ZooKeeper 3.8's wchp and
// wchs list data watches (exists, get) only; mntr's zk_watch_count counts
// child watches (getChildren) as well. -1 if the reply has no such line.
inline long four_letter_number(const std::string& reply,
                               const std::string& key) {
  const auto at = reply.find(key);
  if (at == std::string::npos) return -1;
  std::size_t i = at + key.size();
  while (i < reply.size() &&
         (reply[i] == ':' || reply[i] == '\t' || reply[i] == ' ')) {
    ++i;
  }
  long n = 0;
  bool any = false;
  for (; i < reply.size() && std::isdigit(static_cast<unsigned char>(reply[i]));
       ++i) {
    n = n * 10 + (reply[i] - '0');
    any = true;
  }
  return any ? n : -1;
}
inline long child_watch_count(const ZkProcess& zk) {
  const long all = four_letter_number(zk.four_letter("mntr"), "zk_watch_count");
  const long data = four_letter_number(zk.four_letter("wchs"), "Total watches");
  return all < 0 || data < 0 ? -1 : all - data;
}

// A ZooKeeper C client session (no chroot) for looking at nodes; with
// `digest` ("user:password"), authenticated with it (a test's attacker or
// a holder of the store's credentials).
class ZkObserver {
 public:
  explicit ZkObserver(const std::string& hostport,
                      const std::string& digest = {}) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    zh_ = zookeeper_init(hostport.c_str(), &ZkObserver::watcher, 10000, nullptr,
                         this, 0);
    if (zh_ != nullptr && !digest.empty()) {
      // Sent ahead of every request of the session.
      zoo_add_auth(zh_, "digest", digest.data(),
                   static_cast<int>(digest.size()), nullptr, nullptr);
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, 15s, [&] { return connected_; });
  }
  ~ZkObserver() {
    if (zh_ != nullptr) zookeeper_close(zh_);
  }
  ZkObserver(const ZkObserver&) = delete;
  ZkObserver& operator=(const ZkObserver&) = delete;

  bool ok() const {
    std::lock_guard<std::mutex> lk(mu_);
    return zh_ != nullptr && connected_;
  }
  // ZOK, ZNONODE, ...; `out` sorted (sequence suffixes sort in order).
  int children(const std::string& path, std::vector<std::string>* out) {
    String_vector v{};
    const int rc = zoo_get_children(zh_, path.c_str(), 0, &v);
    out->clear();
    if (rc == ZOK) {
      for (int i = 0; i < v.count; ++i) out->emplace_back(v.data[i]);
      deallocate_String_vector(&v);
      std::sort(out->begin(), out->end(), [](const auto& a, const auto& b) {
        return a.substr(a.size() - std::min<std::size_t>(a.size(), 10)) <
               b.substr(b.size() - std::min<std::size_t>(b.size(), 10));
      });
    }
    return rc;
  }
  // The children of `path`, none if it does not exist; -1 on other errors.
  long count_children(const std::string& path) {
    std::vector<std::string> v;
    const int rc = children(path, &v);
    if (rc == ZNONODE) return 0;
    return rc == ZOK ? static_cast<long>(v.size()) : -1;
  }
  int get(const std::string& path, std::string* data, Stat* stat) {
    std::vector<char> buf(1 << 20);
    int len = static_cast<int>(buf.size());
    Stat st{};
    const int rc = zoo_get(zh_, path.c_str(), 0, buf.data(), &len, &st);
    if (rc == ZOK) {
      data->assign(buf.data(), len > 0 ? static_cast<std::size_t>(len) : 0);
      if (stat != nullptr) *stat = st;
    }
    return rc;
  }
  int exists(const std::string& path, Stat* stat = nullptr) {
    Stat st{};
    const int rc = zoo_exists(zh_, path.c_str(), 0, &st);
    if (rc == ZOK && stat != nullptr) *stat = st;
    return rc;
  }
  int remove(const std::string& path) {
    return zoo_delete(zh_, path.c_str(), -1);
  }
  int set(const std::string& path, const std::string& data) {
    return zoo_set(zh_, path.c_str(), data.data(),
                   static_cast<int>(data.size()), -1);
  }
  // Creates a persistent node open to everyone (world:anyone, all), or
  // with `acl`.
  int create_open(const std::string& path, const std::string& data = {},
                  ACL_vector* acl = &ZOO_OPEN_ACL_UNSAFE) {
    return zoo_create(zh_, path.c_str(), data.data(),
                      static_cast<int>(data.size()), acl, 0, nullptr, 0);
  }
  // Creates (or, with `remove`, deletes) the persistent open nodes at
  // `paths` in one transaction (one write to the log instead of one per
  // node).
  int multi(const std::vector<std::string>& paths, bool remove = false) {
    std::vector<zoo_op_t> ops(paths.size());
    std::vector<zoo_op_result_t> res(paths.size());
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (remove) {
        zoo_delete_op_init(&ops[i], paths[i].c_str(), -1);
      } else {
        zoo_create_op_init(&ops[i], paths[i].c_str(), nullptr, -1,
                           &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
      }
    }
    return zoo_multi(zh_, static_cast<int>(ops.size()), ops.data(), res.data());
  }
  int set_acl_open(const std::string& path) {
    return zoo_set_acl(zh_, path.c_str(), -1, &ZOO_OPEN_ACL_UNSAFE);
  }
  // The node's ACL as "scheme:id:perms" (perms as a number), in order.
  int get_acl(const std::string& path, std::vector<std::string>* out) {
    ACL_vector acl{};
    Stat st{};
    const int rc = zoo_get_acl(zh_, path.c_str(), &acl, &st);
    out->clear();
    if (rc == ZOK) {
      for (int i = 0; i < acl.count; ++i) {
        out->push_back(std::string(acl.data[i].id.scheme) + ":" +
                       acl.data[i].id.id + ":" +
                       std::to_string(acl.data[i].perms));
      }
      deallocate_ACL_vector(&acl);
    }
    return rc;
  }

 private:
  static void watcher(zhandle_t*, int type, int state, const char*, void* ctx) {
    auto* self = static_cast<ZkObserver*>(ctx);
    if (type != ZOO_SESSION_EVENT) return;
    std::lock_guard<std::mutex> lk(self->mu_);
    self->connected_ = state == ZOO_CONNECTED_STATE;
    self->cv_.notify_all();
  }

  zhandle_t* zh_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool connected_ = false;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_ZOOKEEPER_ZK_TEST_UTIL_H_
