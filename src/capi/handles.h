// capi/handles.h — what the opaque handles of <baton/baton.h> are, and the
// helpers every C entry point uses (internal to libbaton.so).
//
// Every entry point catches every exception (none may cross the C ABI),
// checks its pointers before anything else, and reports failure as a
// baton_error_t. Handles that own threads or connections record the pid of
// the process that made them; calls compare it with the current pid, which
// a pthread_atfork child handler keeps up to date, so the check costs one
// relaxed atomic load instead of a getpid() system call.
#ifndef BATON_CAPI_HANDLES_H_
#define BATON_CAPI_HANDLES_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "baton/baton.h"
#include "baton/client.h"
#include "baton/counter.h"
#include "baton/elector.h"
#include "baton/error.h"
#include "baton/keeper.h"
#include "baton/lease.h"
#include "baton/options.h"
#include "baton/session.h"

struct baton_holders {
  std::vector<baton::HolderInfo> items;
};

struct baton_error {
  explicit baton_error(baton::Error e)
      : error(std::move(e)), holders{error.holders()} {}
  baton::Error error;
  baton_holders holders;
  bool is_static = false;  // the out-of-memory error: never freed
};

struct baton_lease {
  explicit baton_lease(baton::Lease l);
  baton::Lease lease;
  char token[33];  // lease.token as hex, for baton_lease_token()
};

struct baton_lease_list {
  std::vector<baton_lease> leases;
};

struct baton_lock_info {
  explicit baton_lock_info(baton::LockInfo i)
      : info(std::move(i)), holders{std::move(info.holders)} {}
  baton::LockInfo info;  // its holders moved into `holders`
  baton_holders holders;
};

struct baton_lock_list {
  std::vector<baton_lock_info> locks;
};

struct baton_cancel {
  std::stop_source source;
};

struct baton_client_options {
  baton::ClientOptions options;
};

struct baton_acquire_options {
  baton::AcquireOptions options;
};

// A C callback with its user pointer and a notification fd.
struct baton_lost_sink {
  baton_lost_fn fn = nullptr;
  void* user = nullptr;
  int fd = -1;
};

struct baton_keeper_options {
  std::chrono::milliseconds renew_interval{0};
  baton_lost_sink on_lost;
};

struct baton_elector_options {
  baton::ElectorOptions options;  // without callbacks: those are below
  baton_elected_fn on_elected = nullptr;
  void* on_elected_user = nullptr;
  baton_leader_fn on_new_leader = nullptr;
  void* on_new_leader_user = nullptr;
  baton_lost_sink on_lost;
};

struct baton_client {
  baton_client(baton::Client c, pid_t p)
      : client(std::move(c)), pid(p), url(client.url()) {}
  baton::Client client;
  pid_t pid;
  std::string url;
};

struct baton_keeper {
  baton_keeper(baton::LeaseKeeper k, pid_t p) : keeper(std::move(k)), pid(p) {}
  baton::LeaseKeeper keeper;
  pid_t pid;
};

struct baton_session {
  baton_session(baton::Client c, pid_t p) : session(std::move(c)), pid(p) {}
  baton::Session session;
  pid_t pid;
};

struct baton_elector {
  std::unique_ptr<baton::Elector> elector;  // set once constructed
  pid_t pid = 0;
};

struct baton_leader {
  baton::LeaderInfo info;
};

struct baton_counter {
  baton_counter(baton::Counter c, pid_t p) : counter(std::move(c)), pid(p) {}
  baton::Counter counter;
  pid_t pid;
};

namespace baton::capi {

// A new error the caller owns; never throws (out of memory gives a static
// error that baton_error_destroy leaves alone).
baton_error_t* make_error(Error e) noexcept;
baton_error_t* invalid(std::string message) noexcept;
// `st`'s error, or nullptr if it is OK.
baton_error_t* from_status(const Status& st) noexcept;
// invalid_argument "<what> is NULL" if `p` is null.
baton_error_t* require(const void* p, const char* what) noexcept;
// invalid_argument if `fd` is neither -1 nor an open descriptor.
baton_error_t* check_fd(int fd) noexcept;

// The current process id, kept up to date across fork().
pid_t current_pid() noexcept;
// invalid_argument if a handle of `kind` made in process `owner` is used
// in another process (a child after fork); else nullptr.
baton_error_t* check_process(pid_t owner, const char* kind) noexcept;
inline bool forked(pid_t owner) noexcept { return owner != current_pid(); }

// The checks a call on `handle` starts with: *out cleared first (so that
// it is NULL on any error), the handle, its process, then `out` itself.
template <typename H>
baton_error_t* begin(const H* handle, const char* kind) noexcept {
  if (auto* e = require(handle, kind)) return e;
  return check_process(handle->pid, kind);
}
template <typename H, typename T>
baton_error_t* begin(const H* handle, const char* kind, T** out) noexcept {
  if (out) *out = nullptr;
  if (auto* e = begin(handle, kind)) return e;
  return require(out, "out");
}
// A name given as a C string: present, and valid by the rules of lock
// names (1..512 bytes); `what` names it in the message.
baton_error_t* check_name(const char* name, const char* what) noexcept;

// Runs `body` (returning baton_error_t*) with every exception turned into
// an error: no exception may cross the C ABI.
template <typename F>
baton_error_t* guarded(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return make_error(Error(Errc::internal, "out of memory"));
  } catch (const std::exception& e) {
    return make_error(Error(Errc::internal,
                            std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return make_error(Error(Errc::internal, "unexpected exception"));
  }
}

// `value` stored into *out, or the error (and *out = nullptr).
template <typename Handle, typename T>
baton_error_t* deliver(Result<T>&& r, Handle** out) {
  if (!r.ok()) return make_error(std::move(r).error());
  *out = new Handle(std::move(*r));
  return nullptr;
}

// The stop token of `cancel` (none for nullptr).
inline std::stop_token stop_of(const baton_cancel_t* cancel) {
  return cancel ? cancel->source.get_token() : std::stop_token{};
}

// The AcquireOptions of one call: `options` (or the defaults) themselves,
// or, with a cancel, a copy carrying its stop token.
class CallOptions {
 public:
  CallOptions(const baton_acquire_options_t* options,
              const baton_cancel_t* cancel);
  const AcquireOptions& get() const { return copy_ ? *copy_ : *options_; }

 private:
  const AcquireOptions* options_;
  std::optional<AcquireOptions> copy_;
};

// A C++ on_lost that writes to the sink's fd, then calls its function.
std::function<void(const Error&)> lost_callback(const baton_lost_sink& sink);

// A steady-clock instant as the `_ns` functions give it: nanoseconds on
// CLOCK_MONOTONIC (libstdc++'s steady_clock), 0 for "none".
inline std::int64_t monotonic_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

}  // namespace baton::capi

#endif  // BATON_CAPI_HANDLES_H_
