// stores/zookeeper/zk_conn.cc — ZooKeeper requests with deadlines.
#include "stores/zookeeper/zk_conn.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "stores/zookeeper/zk_handle.h"

namespace baton::store::zk {

void copy_stat(const struct ::Stat* s, Stat* out) {
  if (s == nullptr || out == nullptr) return;
  out->czxid = s->czxid;
  out->mzxid = s->mzxid;
  out->ctime = s->ctime;
  out->mtime = s->mtime;
  out->pzxid = s->pzxid;
  out->ephemeral_owner = s->ephemeralOwner;
  out->version = s->version;
  out->cversion = s->cversion;
  out->num_children = s->numChildren;
}

namespace {

using std::chrono::steady_clock;

// One request's outcome, shared by the caller and the completion.
struct Pending {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  std::string value;  // created path or data
  Stat stat;
  std::vector<std::string> names;
  std::vector<AclEntry> acl;  // get_acls()
  // multi(): buffers the C client writes on completion.
  std::vector<zoo_op_t> ops;
  std::vector<zoo_op_result_t> results;
  std::vector<struct ::Stat> stats;
  std::vector<std::vector<char>> paths;
  std::vector<std::string> keep;  // op paths and data (alive until done)
};

using PendingRef = std::shared_ptr<Pending>;

PendingRef* hold(const PendingRef& p) { return new PendingRef(p); }

// Completes the request behind `data` (and frees the caller's hold on it).
template <typename Fill>
void finish(const void* data, int rc, Fill fill) {
  auto* ref = static_cast<PendingRef*>(const_cast<void*>(data));
  {
    std::lock_guard<std::mutex> lk((*ref)->mu);
    (*ref)->rc = rc;
    fill(**ref);
    (*ref)->done = true;
  }
  (*ref)->cv.notify_all();
  delete ref;
}

void on_string_stat(int rc, const char* value, const struct ::Stat* stat,
                    const void* data) {
  finish(data, rc, [&](Pending& p) {
    if (rc == ZOK && value != nullptr) p.value = value;
    if (rc == ZOK) copy_stat(stat, &p.stat);
  });
}
void on_data(int rc, const char* value, int len, const struct ::Stat* stat,
             const void* data) {
  finish(data, rc, [&](Pending& p) {
    if (rc == ZOK && value != nullptr && len > 0) p.value.assign(value, len);
    if (rc == ZOK) copy_stat(stat, &p.stat);
  });
}
void on_stat(int rc, const struct ::Stat* stat, const void* data) {
  finish(data, rc, [&](Pending& p) {
    if (rc == ZOK) copy_stat(stat, &p.stat);
  });
}
void on_void(int rc, const void* data) {
  finish(data, rc, [](Pending&) {});
}
void on_acl(int rc, struct ACL_vector* acl, struct ::Stat* stat,
            const void* data) {
  finish(data, rc, [&](Pending& p) {
    if (rc != ZOK) return;
    for (int i = 0; acl != nullptr && i < acl->count; ++i) {
      const struct ACL& a = acl->data[i];
      p.acl.push_back(AclEntry{a.id.scheme != nullptr ? a.id.scheme : "",
                               a.id.id != nullptr ? a.id.id : "", a.perms});
    }
    copy_stat(stat, &p.stat);
  });
}
void on_strings_stat(int rc, const struct String_vector* strings,
                     const struct ::Stat* stat, const void* data) {
  finish(data, rc, [&](Pending& p) {
    if (rc != ZOK) return;
    if (strings != nullptr) {
      for (int i = 0; i < strings->count; ++i) {
        p.names.emplace_back(strings->data[i]);
      }
    }
    copy_stat(stat, &p.stat);
  });
}

// Waits for `p` until `until`; kGaveUp if it did not complete.
int await(const PendingRef& p, SteadyTime until) {
  std::unique_lock<std::mutex> lk(p->mu);
  if (!p->cv.wait_until(lk, until, [&] { return p->done; })) return kGaveUp;
  return p->rc;
}

void conn_watcher(zhandle_t* zh, int type, int state, const char* path,
                  void* ctx) {
  auto* h = static_cast<Conn::Handle*>(const_cast<void*>(zoo_get_context(zh)));
  if (h == nullptr || h->conn == nullptr) return;
  if (type == ZOO_SESSION_EVENT) {
    {
      std::lock_guard<std::mutex> lk(h->mu);
      h->state = state;
    }
    h->cv.notify_all();
    h->conn->session_event(state);
    return;
  }
  const char what = type == ZOO_DELETED_EVENT   ? 'd'
                    : type == ZOO_CHANGED_EVENT ? 'c'
                                                : 'o';
  h->conn->notify_watch(reinterpret_cast<std::uintptr_t>(ctx), what,
                        path != nullptr ? path : "");
}

// ZooKeeper's answer to the digest credentials of the handle in `data`.
void on_auth(int rc, const void* data) {
  auto* h = static_cast<Conn::Handle*>(const_cast<void*>(data));
  {
    std::lock_guard<std::mutex> lk(h->mu);
    h->auth_done = true;
    h->auth_rc = rc;
    if (rc != ZOK) h->state = ZOO_AUTH_FAILED_STATE;
  }
  h->cv.notify_all();
}

void global_watcher(zhandle_t* zh, int type, int state, const char* path,
                    void* ctx) {
  conn_watcher(zh, type, state, path, ctx);
}
void watch_fn(zhandle_t* zh, int type, int state, const char* path, void* ctx) {
  conn_watcher(zh, type, state, path, ctx);
}
}  // namespace

Conn::~Conn() {
  std::shared_ptr<Handle> h;
  {
    std::lock_guard<std::mutex> lk(mu_);
    h = std::move(handle_);
  }
  h.reset();  // closes the session: its ephemeral nodes go at once
}

std::shared_ptr<Conn::Handle> Conn::handle() {
  std::shared_ptr<Handle> old;  // closed below, outside mu_ (closing waits
                                // for the C client's threads, which take it)
  std::shared_ptr<Handle> h;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (handle_ != nullptr) {
      int state = 0;
      {
        std::lock_guard<std::mutex> hl(handle_->mu);
        state = handle_->state;
      }
      if (state != ZOO_EXPIRED_SESSION_STATE &&
          state != ZOO_AUTH_FAILED_STATE &&
          is_unrecoverable(handle_->zh) == ZOK) {
        return handle_;
      }
      // The session is gone for good: a new one (the old handle closes
      // once the calls still using it are done).
      const clientid_t* id = zoo_client_id(handle_->zh);
      if (id != nullptr && expired_.size() < 1000) {
        expired_.push_back(id->client_id);
      }
      old = std::move(handle_);
    }
    h = std::make_shared<Handle>();
    h->conn = this;
    h->zh = zookeeper_init2(options_.hosts.c_str(), global_watcher,
                            static_cast<int>(options_.session_timeout.count()),
                            nullptr, h.get(), 0, nullptr);
    if (h->zh == nullptr) return nullptr;
    // Before any call can use the handle: the C client keeps the
    // credentials and sends them ahead of every queued request, on this
    // connection and each reconnection of the session. A new session (after
    // an expiry) starts without them, hence here, for every handle.
    if (!options_.digest.empty() &&
        zoo_add_auth(h->zh, "digest", options_.digest.data(),
                     static_cast<int>(options_.digest.size()), on_auth,
                     h.get()) != ZOK) {
      return nullptr;
    }
    handle_ = h;
  }
  old.reset();
  return h;
}

SteadyTime Conn::call_until(const CallContext& ctx) const {
  // ctx's deadline is on its own clock: what is left of it, from now.
  return steady_clock::now() + std::min(options_.request_timeout, ctx.left());
}

std::uint64_t Conn::register_watch(const std::shared_ptr<Waker>& w) {
  std::lock_guard<std::mutex> lk(mu_);
  if (watches_.size() > sweep_at_) {
    for (auto it = watches_.begin(); it != watches_.end();) {
      it = it->second.expired() ? watches_.erase(it) : std::next(it);
    }
    // Live watches (a change feed keeps thousands) are not swept again
    // until as many more were registered: O(1) per registration.
    sweep_at_ = std::max<std::size_t>(1024, 2 * watches_.size());
  }
  const std::uint64_t id = next_watch_++;
  watches_[id] = w;
  return id;
}

void Conn::notify_watch(std::uint64_t id, char what, std::string_view path) {
  std::shared_ptr<Waker> w;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = watches_.find(id);
    if (it == watches_.end()) return;
    w = it->second.lock();
    watches_.erase(it);  // a watch fires once
  }
  if (w) w->notify(what, path);
}

void Conn::on_session_event(const std::shared_ptr<Waker>& w) {
  std::lock_guard<std::mutex> lk(mu_);
  std::erase_if(session_wakers_, [](auto& x) { return x.expired(); });
  session_wakers_.push_back(w);
}

void Conn::session_event(int /*state*/) {
  std::vector<std::shared_ptr<Waker>> wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [id, weak] : watches_) {
      if (auto w = weak.lock()) wake.push_back(std::move(w));
    }
    for (auto& weak : session_wakers_) {
      if (auto w = weak.lock()) wake.push_back(std::move(w));
    }
  }
  for (auto& w : wake) w->notify();
}

namespace {

// Sends one request (`send(zh, data)` returns the C client's code) and
// waits for its completion until `until`; *done is the request, to read
// its results. A request that was not sent never completes: its hold is
// freed here.
template <typename Send>
int send_and_wait(zhandle_t* zh, Send&& send, SteadyTime until,
                  PendingRef* done) {
  if (until <= steady_clock::now()) return kGaveUp;  // no time to wait: unsent
  auto p = std::make_shared<Pending>();
  PendingRef* ref = hold(p);
  const int rc = send(zh, ref);
  if (rc != ZOK) {
    delete ref;
    return rc;
  }
  *done = p;
  return await(p, until);
}

// One request on `h`, waited for until `until`; on ZOK `read` takes its
// results.
template <typename Send, typename Read>
int run(const std::shared_ptr<Conn::Handle>& h, SteadyTime until, Send&& send,
        Read&& read) {
  if (h == nullptr) return ZINVALIDSTATE;
  PendingRef p;
  const int out = send_and_wait(h->zh, send, until, &p);
  if (out != ZOK) return out;
  std::lock_guard<std::mutex> lk(p->mu);
  read(*p);
  return out;
}

void* watch_context(std::uint64_t id) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(id));
}

}  // namespace

int Conn::create(const std::string& path, std::string_view data, int flags,
                 Stat* stat, const CallContext& ctx) {
  return run(
      handle(), call_until(ctx),
      [&](zhandle_t* zh, PendingRef* ref) {
        return zoo_acreate2(zh, path.c_str(), data.data(),
                            static_cast<int>(data.size()), &acl_->vec, flags,
                            on_string_stat, ref);
      },
      [&](Pending& p) {
        if (stat != nullptr) *stat = p.stat;
        note_server_time(p.stat.mtime);
      });
}

int Conn::get(const std::string& path, std::string* data, Stat* stat,
              const CallContext& ctx) {
  return run(
      handle(), call_until(ctx),
      [&](zhandle_t* zh, PendingRef* ref) {
        return zoo_aget(zh, path.c_str(), 0, on_data, ref);
      },
      [&](Pending& p) {
        if (data != nullptr) *data = p.value;
        if (stat != nullptr) *stat = p.stat;
      });
}

int Conn::set(const std::string& path, std::string_view data, int version,
              Stat* stat, const CallContext& ctx) {
  return run(
      handle(), call_until(ctx),
      [&](zhandle_t* zh, PendingRef* ref) {
        return zoo_aset(zh, path.c_str(), data.data(),
                        static_cast<int>(data.size()), version, on_stat, ref);
      },
      [&](Pending& p) {
        if (stat != nullptr) *stat = p.stat;
        note_server_time(p.stat.mtime);
      });
}

int Conn::remove(const std::string& path, int version, const CallContext& ctx) {
  return run(
      handle(), call_until(ctx),
      [&](zhandle_t* zh, PendingRef* ref) {
        return zoo_adelete(zh, path.c_str(), version, on_void, ref);
      },
      [](Pending&) {});
}

int Conn::children(const std::string& path, std::vector<std::string>* names,
                   Stat* stat, const CallContext& ctx) {
  return run(
      handle(), call_until(ctx),
      [&](zhandle_t* zh, PendingRef* ref) {
        return zoo_aget_children2(zh, path.c_str(), 0, on_strings_stat, ref);
      },
      [&](Pending& p) {
        if (names != nullptr) *names = std::move(p.names);
        if (stat != nullptr) *stat = p.stat;
      });
}

int Conn::exists(const std::string& path, Stat* stat, const CallContext& ctx) {
  return run(
      handle(), call_until(ctx),
      [&](zhandle_t* zh, PendingRef* ref) {
        return zoo_aexists(zh, path.c_str(), 0, on_stat, ref);
      },
      [&](Pending& p) {
        if (stat != nullptr) *stat = p.stat;
      });
}

int Conn::watch(const std::vector<std::string>& paths,
                const std::shared_ptr<Waker>& watch, std::vector<int>* rcs,
                std::vector<Stat>* stats, std::vector<std::string>* datas,
                const CallContext& ctx) {
  rcs->assign(paths.size(), kGaveUp);
  stats->assign(paths.size(), Stat{});
  datas->assign(paths.size(), std::string());
  const SteadyTime until = call_until(ctx);
  if (until <= steady_clock::now()) return kGaveUp;
  auto h = handle();
  if (h == nullptr) return ZINVALIDSTATE;
  std::vector<PendingRef> sent;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    auto p = std::make_shared<Pending>();
    PendingRef* ref = hold(p);
    const int rc =
        zoo_awget(h->zh, paths[i].c_str(), watch_fn,
                  watch_context(register_watch(watch)), on_data, ref);
    if (rc != ZOK) {
      delete ref;  // not sent: never completes
      return rc;
    }
    sent.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < sent.size(); ++i) {
    (*rcs)[i] = await(sent[i], until);
    if ((*rcs)[i] == ZOK) {
      std::lock_guard<std::mutex> lk(sent[i]->mu);
      (*stats)[i] = sent[i]->stat;
      (*datas)[i] = std::move(sent[i]->value);
    }
  }
  return ZOK;
}

int Conn::watch_children(const std::vector<std::string>& paths,
                         const std::shared_ptr<Waker>& watch,
                         std::vector<int>* rcs,
                         std::vector<std::vector<std::string>>* names,
                         const CallContext& ctx) {
  rcs->assign(paths.size(), kGaveUp);
  names->assign(paths.size(), {});
  const SteadyTime until = call_until(ctx);
  if (until <= steady_clock::now()) return kGaveUp;
  auto h = handle();
  if (h == nullptr) return ZINVALIDSTATE;
  std::vector<PendingRef> sent;
  for (const auto& path : paths) {
    auto p = std::make_shared<Pending>();
    PendingRef* ref = hold(p);
    const int rc = zoo_awget_children2(h->zh, path.c_str(), watch_fn,
                                       watch_context(register_watch(watch)),
                                       on_strings_stat, ref);
    if (rc != ZOK) {
      delete ref;  // not sent: never completes
      return rc;
    }
    sent.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < sent.size(); ++i) {
    (*rcs)[i] = await(sent[i], until);
    if ((*rcs)[i] == ZOK) {
      std::lock_guard<std::mutex> lk(sent[i]->mu);
      (*names)[i] = std::move(sent[i]->names);
    }
  }
  return ZOK;
}

int Conn::get_acls(const std::vector<std::string>& paths, std::vector<int>* rcs,
                   std::vector<std::vector<AclEntry>>* acls,
                   const CallContext& ctx) {
  rcs->assign(paths.size(), kGaveUp);
  acls->assign(paths.size(), {});
  const SteadyTime until = call_until(ctx);
  if (until <= steady_clock::now()) return kGaveUp;
  auto h = handle();
  if (h == nullptr) return ZINVALIDSTATE;
  std::vector<PendingRef> sent;
  for (const auto& path : paths) {
    auto p = std::make_shared<Pending>();
    PendingRef* ref = hold(p);
    const int rc = zoo_aget_acl(h->zh, path.c_str(), on_acl, ref);
    if (rc != ZOK) {
      delete ref;  // not sent: never completes
      return rc;
    }
    sent.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < sent.size(); ++i) {
    (*rcs)[i] = await(sent[i], until);
    if ((*rcs)[i] == ZOK) {
      std::lock_guard<std::mutex> lk(sent[i]->mu);
      (*acls)[i] = std::move(sent[i]->acl);
    }
  }
  return ZOK;
}

int Conn::multi(const std::vector<Op>& ops, std::vector<OpResult>* results,
                const CallContext& ctx) {
  const SteadyTime until = call_until(ctx);
  if (until <= steady_clock::now()) return kGaveUp;
  auto h = handle();
  if (h == nullptr) return ZINVALIDSTATE;
  auto p = std::make_shared<Pending>();
  const std::size_t n = ops.size();
  p->ops.resize(n);
  p->results.resize(n);
  p->stats.resize(n);
  p->paths.resize(n);
  p->keep.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = ops[i];
    const std::string& path = p->keep.emplace_back(op.path);
    const std::string& data = p->keep.emplace_back(op.data);
    switch (op.type) {
      case Op::kCreate:
        p->paths[i].assign(path.size() + 16, '\0');
        zoo_create_op_init(&p->ops[i], path.c_str(), data.data(),
                           static_cast<int>(data.size()), &acl_->vec, op.flags,
                           p->paths[i].data(),
                           static_cast<int>(p->paths[i].size()));
        break;
      case Op::kSet:
        zoo_set_op_init(&p->ops[i], path.c_str(), data.data(),
                        static_cast<int>(data.size()), op.version,
                        &p->stats[i]);
        break;
      case Op::kDelete:
        zoo_delete_op_init(&p->ops[i], path.c_str(), op.version);
        break;
      case Op::kCheck:
        zoo_check_op_init(&p->ops[i], path.c_str(), op.version);
        break;
    }
  }
  PendingRef* ref = hold(p);
  const int rc = zoo_amulti(h->zh, static_cast<int>(n), p->ops.data(),
                            p->results.data(), on_void, ref);
  if (rc != ZOK) {
    delete ref;  // not sent: never completes
    return rc;
  }
  const int out = await(p, until);
  if (out == kGaveUp) return out;
  std::lock_guard<std::mutex> lk(p->mu);
  if (results != nullptr) {
    results->assign(n, OpResult{});
    for (std::size_t i = 0; i < n; ++i) {
      (*results)[i].rc = p->results[i].err;
      if (ops[i].type == Op::kCreate && p->results[i].err == ZOK) {
        (*results)[i].path = p->paths[i].data();
      }
      if (ops[i].type == Op::kSet && p->results[i].err == ZOK) {
        copy_stat(&p->stats[i], &(*results)[i].stat);
      }
    }
  }
  if (out == ZOK) {
    for (std::size_t i = 0; i < n; ++i) {
      if (ops[i].type == Op::kSet) {
        note_server_time(p->stats[i].mtime);
        break;
      }
    }
  }
  return out;
}

}  // namespace baton::store::zk
