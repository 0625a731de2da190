// bench/raw_zk.cc — raw-zk://, the ZooKeeper floor (raw_zk.h).
//
// Why create + delete of one EPHEMERAL_SEQUENTIAL node is the least an
// uncontended acquire + release can cost on ZooKeeper, for the guarantee
// the zookeeper:// store gives (a lock that ends with its owner's session,
// FIFO among waiters):
// - The grant must be a write. Only a write goes through the leader and is
//   committed by a quorum before it is acknowledged (in the transaction log,
//   fsynced: forceSync is on by default), and only a node that exists on
//   the server keeps a second client out. An ephemeral node is the only
//   state ZooKeeper removes when the owner's session dies, so a crashed
//   client cannot hold the lock for ever.
// - The release must be a write too: the delete (closing the session would
//   also delete the node, but costs a new session per pair).
// - Sequential under one parent per lock: the sequence number is the FIFO
//   order the contended case needs (the store uses the same layout), and it
//   costs nothing more than a plain create.
// - Reads are cheaper (answered by the server the client is connected to,
//   no quorum, no fsync) but are round trips. A try-acquire that must find
//   out whether it is first needs getChildren after the create; in the
//   uncontended workload nobody else uses a client's lock, so the floor
//   leaves it out and stays a lower bound of every correct implementation.
//   `check=children` adds it (the cost of that read, shown separately).
// So the floor is two quorum writes and two round trips per pair. The
// contended floor adds what every waiter of the recipe must do: getChildren
// after its create, and when it is not first a watch on the node just
// before it (the watch fires on the delete, then getChildren again): one
// notification and one read between a release and the next grant.
//
// The synchronous API of the multi-threaded client: each call queues one
// request for the client's I/O thread and sleeps until that thread, having
// read the reply, wakes it. (An async call + wait, as the zookeeper://
// store makes them, goes one thread further: the I/O thread hands the reply
// to the completion thread, which runs the callback that wakes the caller.
// So the floor is the cheaper of the two ways; `api=async` makes the
// pair's create and delete async + wait instead, to show that hop's cost.)
// Watch events always come through the completion thread.
//
// `grant=write` adds what a lease needs that the recipe does not give: a
// waiter that becomes first writes its node (setData) before it holds, so
// the lease starts, and takes its fencing token, at a write by ZooKeeper's
// clock (the node's mtime and mzxid), as the zookeeper:// store's grant
// does. A request that was first at its create needs no such write (the
// create is that write). This is the contended floor of the store's
// guarantee: one write more per handed-over pair, on the critical path.
#include "bench/raw_zk.h"

#ifndef THREADED
#define THREADED  // declares the synchronous API (libzookeeper_mt)
#endif
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/duration.h"
#include "core/url.h"

namespace baton::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct ZkOptions {
  std::string hosts;  // "h1:p1,h2:p2"
  milliseconds session_timeout{10'000};
  bool check = false;        // try_acquire also lists the children
  bool async = false;        // create and delete by async call + wait
  bool grant_write = false;  // a waiter writes its node when it is first
};

Result<ZkOptions> parse_options(std::string_view text) {
  auto u = core::parse_url(text, 2181);
  if (!u) return u.error();
  ZkOptions o;
  if (u->hosts.empty()) {
    return Error(Errc::invalid_argument, "raw-zk: expected raw-zk://host:port");
  }
  if (!u->path.empty()) {
    return Error(Errc::invalid_argument,
                 "raw-zk: no chroot (its nodes live under /raw)");
  }
  for (const auto& h : u->hosts) {
    if (!o.hosts.empty()) o.hosts += ',';
    o.hosts += h.host + ":" + std::to_string(h.port);
  }
  for (const auto& [k, v] : u->query) {
    if (k == "session_timeout") {
      auto d = parse_duration(v);
      if (!d) return d.error();
      if (d->count() < 1 || d->count() > 3'600'000) {
        return Error(Errc::invalid_argument,
                     "raw-zk: session_timeout must be 1ms..1h");
      }
      o.session_timeout = *d;
    } else if (k == "check") {
      if (v != "children" && v != "none") {
        return Error(
            Errc::invalid_argument,
            "raw-zk: check must be children or none, not \"" + v + "\"");
      }
      o.check = v == "children";
    } else if (k == "api") {
      if (v != "sync" && v != "async") {
        return Error(Errc::invalid_argument,
                     "raw-zk: api must be sync or async, not \"" + v + "\"");
      }
      o.async = v == "async";
    } else if (k == "grant") {
      if (v != "write" && v != "none") {
        return Error(Errc::invalid_argument,
                     "raw-zk: grant must be write or none, not \"" + v + "\"");
      }
      o.grant_write = v == "write";
    } else {
      return Error(Errc::invalid_argument,
                   "raw-zk: unknown option \"" + k +
                       "\" (session_timeout, check, api, grant)");
    }
  }
  return o;
}

// Woken by session events and watches, from the C client's completion
// thread.
class Waker {
 public:
  void notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++gen_;
    }
    cv_.notify_all();
  }
  std::uint64_t generation() {
    std::lock_guard<std::mutex> lock(mu_);
    return gen_;
  }
  // Sleeps until notified after *seen (updated) or `until`; true if
  // notified.
  bool wait_until(Clock::time_point until, std::uint64_t* seen) {
    std::unique_lock<std::mutex> lock(mu_);
    bool woke = cv_.wait_until(lock, until, [&] { return gen_ != *seen; });
    *seen = gen_;
    return woke;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t gen_ = 0;
};

// One async call's reply; its caller waits for it. The client always calls
// the completion once the call was queued (ZCONNECTIONLOSS, ZCLOSING when
// the session goes), so the wait ends.
class Reply {
 public:
  void set(int rc, const char* value) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      rc_ = rc;
      if (value != nullptr) value_ = value;
      done_ = true;
    }
    cv_.notify_one();
  }
  int wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return rc_;
  }
  const std::string& value() const { return value_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  int rc_ = 0;
  std::string value_;
};

void on_string(int rc, const char* value, const void* data) {
  static_cast<Reply*>(const_cast<void*>(data))->set(rc, value);
}
void on_void(int rc, const void* data) {
  static_cast<Reply*>(const_cast<void*>(data))->set(rc, nullptr);
}

// The session watcher and every watch: wake whoever waits.
void on_event(zhandle_t* zh, int, int, const char*, void* ctx) {
  void* w = ctx != nullptr ? ctx : const_cast<void*>(zoo_get_context(zh));
  if (w != nullptr) static_cast<Waker*>(w)->notify();
}

Error zk_error(int rc, const std::string& what) {
  const bool down = rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
                    rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE ||
                    rc == ZCLOSING;
  return Error(down ? Errc::unavailable : Errc::internal,
               "raw-zk " + what + ": " + zerror(rc));
}

class RawZkSession final : public Session {
 public:
  RawZkSession(bool check, bool async, bool grant_write)
      : check_(check), async_(async), grant_write_(grant_write) {}
  ~RawZkSession() override {
    // Joins the client's threads: no callback reaches waker_ after this.
    if (zh_ != nullptr) zookeeper_close(zh_);
  }
  RawZkSession(const RawZkSession&) = delete;
  RawZkSession& operator=(const RawZkSession&) = delete;

  Status connect(const ZkOptions& o) {
    zh_ = zookeeper_init(o.hosts.c_str(), on_event,
                         static_cast<int>(o.session_timeout.count()), nullptr,
                         &waker_, 0);
    if (zh_ == nullptr) {
      return Error(Errc::unavailable, std::string("raw-zk: zookeeper_init: ") +
                                          std::strerror(errno));
    }
    const auto until = Clock::now() + std::chrono::seconds(10);
    std::uint64_t seen = waker_.generation();
    while (zoo_state(zh_) != ZOO_CONNECTED_STATE) {
      if (!waker_.wait_until(until, &seen) && Clock::now() >= until) {
        return Error(Errc::unavailable,
                     "raw-zk: no session with " + o.hosts + " within 10 s");
      }
    }
    return {};
  }

  Status try_acquire(const std::string& name) override {
    auto p = parent(name);
    if (!p) return p.error();
    if (auto s = create(*p); !s) return s;
    if (!check_) return {};
    auto kids = children(*p);
    if (!kids) {
      abandon();
      return kids.error();
    }
    if (!kids->empty() && *p + "/" + kids->front() == node_) return {};
    abandon();
    return Error(Errc::not_acquired, "raw-zk: a lower node exists under " + *p);
  }

  Status acquire(const std::string& name, milliseconds wait) override {
    const auto until = Clock::now() + wait;
    auto p = parent(name);
    if (!p) return p.error();
    if (auto s = create(*p); !s) return s;
    const std::string me = node_.substr(p->size() + 1);
    for (bool waited = false;; waited = true) {
      auto kids = children(*p);
      if (!kids) {
        abandon();
        return kids.error();
      }
      auto it = std::lower_bound(kids->begin(), kids->end(), me);
      if (it == kids->end() || *it != me) {
        node_.clear();
        return Error(Errc::lock_lost,
                     "raw-zk: own node " + me + " is gone (session expired?)");
      }
      if (it == kids->begin()) {
        if (!grant_write_ || !waited) return {};
        const int rc = zoo_set(zh_, node_.c_str(), "h", 1, 0);
        if (rc == ZOK) return {};
        abandon();
        return zk_error(rc, "set " + node_);
      }
      // Watch the node just before this one; re-list when it goes (it may
      // have been a waiter that gave up, not the holder).
      const std::string pred = *p + "/" + *(it - 1);
      std::uint64_t seen = waker_.generation();
      char buf[1];
      int len = static_cast<int>(sizeof buf);
      int rc =
          zoo_wget(zh_, pred.c_str(), on_event, &waker_, buf, &len, nullptr);
      if (rc == ZNONODE) continue;  // gone already
      if (rc != ZOK) {
        abandon();
        return zk_error(rc, "get " + pred);
      }
      if (!waker_.wait_until(until, &seen)) {
        abandon();
        return Error(Errc::timeout, "raw-zk: not granted within the wait");
      }
    }
  }

  Status release() override {
    if (node_.empty()) return Error(Errc::internal, "release without a lease");
    int rc = ZOK;
    if (async_) {
      Reply r;
      rc = zoo_adelete(zh_, node_.c_str(), -1, on_void, &r);
      if (rc == ZOK) rc = r.wait();
    } else {
      rc = zoo_delete(zh_, node_.c_str(), -1);
    }
    std::string gone = std::move(node_);
    node_.clear();
    if (rc == ZNONODE) {
      return Error(Errc::lock_lost, "raw-zk: " + gone + " is gone");
    }
    if (rc != ZOK) return zk_error(rc, "delete " + gone);
    return {};
  }

  Status extend() override {
    return Error(Errc::invalid_argument,
                 "raw-zk: no extend (an ephemeral node lives with its "
                 "session)");
  }

  Result<std::size_t> waiters(const std::string& name) override {
    auto p = parent(name);
    if (!p) return p.error();
    auto kids = children(*p);
    if (!kids) return kids.error();
    return kids->empty() ? 0 : kids->size() - 1;
  }

 private:
  // /raw/<name, '/' as '_'>, created (persistent) once per session.
  Result<std::string> parent(const std::string& name) {
    std::string p = "/raw/" + name;
    std::replace(p.begin() + 5, p.end(), '/', '_');
    if (made_.contains(p)) return p;
    for (const std::string& path : {std::string("/raw"), p}) {
      if (made_.contains(path)) continue;
      const int rc =
          zoo_create(zh_, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                     ZOO_PERSISTENT, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return zk_error(rc, "create " + path);
      made_.insert(path);
    }
    return p;
  }

  // One EPHEMERAL_SEQUENTIAL node <parent>/n-NNNNNNNNNN, without data.
  Status create(const std::string& parent) {
    const std::string path = parent + "/n-";
    if (async_) {
      Reply r;
      int rc = zoo_acreate(zh_, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                           ZOO_EPHEMERAL_SEQUENTIAL, on_string, &r);
      if (rc == ZOK) rc = r.wait();
      if (rc != ZOK) return zk_error(rc, "create " + path);
      node_ = r.value();
      return {};
    }
    buf_.assign(path.size() + 16, '\0');  // + 10 digits + NUL
    const int rc = zoo_create(zh_, path.c_str(), nullptr, -1,
                              &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                              buf_.data(), static_cast<int>(buf_.size()));
    if (rc != ZOK) return zk_error(rc, "create " + path);
    node_.assign(buf_.data());
    return {};
  }

  // The children in sequence order ("n-" + 10 digits: lexical order).
  Result<std::vector<std::string>> children(const std::string& parent) {
    String_vector v{};
    const int rc = zoo_get_children(zh_, parent.c_str(), 0, &v);
    if (rc != ZOK) return zk_error(rc, "getChildren " + parent);
    std::vector<std::string> out;
    out.reserve(static_cast<std::size_t>(v.count));
    for (int i = 0; i < v.count; ++i) out.emplace_back(v.data[i]);
    deallocate_String_vector(&v);
    std::sort(out.begin(), out.end());
    return out;
  }

  // Drops this session's request node (best effort).
  void abandon() {
    if (!node_.empty()) (void)zoo_delete(zh_, node_.c_str(), -1);
    node_.clear();
  }

  bool check_;
  bool async_;
  bool grant_write_;
  Waker waker_;  // outlives zh_ (see the destructor)
  zhandle_t* zh_ = nullptr;
  std::set<std::string> made_;  // parents known to exist
  std::string node_;            // the held or requested node, full path
  std::vector<char> buf_;
};

}  // namespace

Result<std::unique_ptr<Session>> open_raw_zk_session(const LoadOptions& o) {
  auto opts = parse_options(o.store);
  if (!opts) return opts.error();
  // The C client logs every connect at INFO on stderr; keep errors only.
  static std::once_flag quiet;
  std::call_once(quiet, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR); });
  auto s = std::make_unique<RawZkSession>(opts->check, opts->async,
                                          opts->grant_write);
  if (auto c = s->connect(*opts); !c) return c.error();
  return std::unique_ptr<Session>(std::move(s));
}

}  // namespace baton::bench
