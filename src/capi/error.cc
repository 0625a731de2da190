// capi/error.cc — errors, holder lists, versions, owner tokens, cancel
// handles, and the helpers of capi/handles.h.
#include "baton/error.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "baton/duration.h"
#include "baton/lease.h"
#include "baton/validate.h"
#include "capi/handles.h"

namespace baton::capi {
namespace {

static_assert(BATON_ERRC_NOT_ACQUIRED == int(Errc::not_acquired));
static_assert(BATON_ERRC_TIMEOUT == int(Errc::timeout));
static_assert(BATON_ERRC_LOCK_LOST == int(Errc::lock_lost));
static_assert(BATON_ERRC_INVALID_ARGUMENT == int(Errc::invalid_argument));
static_assert(BATON_ERRC_UNAVAILABLE == int(Errc::unavailable));
static_assert(BATON_ERRC_PERMISSION_DENIED == int(Errc::permission_denied));
static_assert(BATON_ERRC_INTERNAL == int(Errc::internal));
static_assert(BATON_ERRC_CANCELLED == int(Errc::cancelled));
static_assert(BATON_ERRC_UNSUPPORTED == int(Errc::unsupported));

std::atomic<pid_t> g_pid{0};

void after_fork_in_child() {
  g_pid.store(::getpid(), std::memory_order_relaxed);
}

bool known_code(baton_errc_t code) {
  return code >= BATON_ERRC_NOT_ACQUIRED && code <= BATON_ERRC_UNSUPPORTED;
}

}  // namespace

baton_error_t* make_error(Error e) noexcept {
  try {
    return new baton_error(std::move(e));
  } catch (...) {
    // No memory for the error itself: one static answer, never freed.
    static baton_error oom = [] {
      baton_error err(Error(Errc::internal, "out of memory"));
      err.is_static = true;
      return err;
    }();
    return &oom;
  }
}

baton_error_t* invalid(std::string message) noexcept {
  return make_error(Error(Errc::invalid_argument, std::move(message)));
}

baton_error_t* from_status(const Status& st) noexcept {
  return st.ok() ? nullptr : make_error(st.error());
}

baton_error_t* require(const void* p, const char* what) noexcept {
  if (p) return nullptr;
  try {
    return invalid(std::string(what) + " is NULL");
  } catch (...) {
    return make_error(Error(Errc::internal, "out of memory"));
  }
}

baton_error_t* check_name(const char* name, const char* what) noexcept {
  if (auto* e = require(name, what)) return e;
  try {
    return from_status(validate_lock_name(name, what));
  } catch (...) {
    return make_error(Error(Errc::internal, "out of memory"));
  }
}

baton_error_t* check_fd(int fd) noexcept {
  if (fd == -1 || (fd >= 0 && ::fcntl(fd, F_GETFD) != -1)) return nullptr;
  try {
    return invalid("fd " + std::to_string(fd) +
                   " is not an open file descriptor (-1 = none)");
  } catch (...) {
    return make_error(Error(Errc::internal, "out of memory"));
  }
}

pid_t current_pid() noexcept {
  static const bool registered = [] {
    g_pid.store(::getpid(), std::memory_order_relaxed);
    ::pthread_atfork(nullptr, nullptr, after_fork_in_child);
    return true;
  }();
  (void)registered;
  return g_pid.load(std::memory_order_relaxed);
}

baton_error_t* check_process(pid_t owner, const char* kind) noexcept {
  const pid_t now = current_pid();
  if (owner == now) return nullptr;
  try {
    return invalid(std::string("this baton ") + kind + " was made in process " +
                   std::to_string(owner) + " and is used in process " +
                   std::to_string(now) +
                   " after fork(): its threads and connections stay with "
                   "the parent; open a new client in the child");
  } catch (...) {
    return make_error(Error(Errc::internal, "out of memory"));
  }
}

CallOptions::CallOptions(const baton_acquire_options_t* options,
                         const baton_cancel_t* cancel) {
  static const AcquireOptions kDefaults;
  options_ = options ? &options->options : &kDefaults;
  if (cancel) {
    copy_.emplace(*options_);
    copy_->stop = cancel->source.get_token();
  }
}

std::function<void(const Error&)> lost_callback(const baton_lost_sink& sink) {
  if (!sink.fn && sink.fd < 0) return {};
  return [sink](const Error& why) {
    if (sink.fd >= 0) {
      const std::uint64_t one = 1;
      // A full pipe already reads as ready: nothing to wait for.
      (void)!::write(sink.fd, &one, sizeof one);
    }
    if (sink.fn) {
      baton_error err(why);
      sink.fn(&err, sink.user);
    }
  };
}

}  // namespace baton::capi

using baton::capi::guarded;

extern "C" {

int baton_version(void) { return BATON_VERSION_NUMBER; }
const char* baton_version_string(void) { return BATON_VERSION_STRING; }

const char* baton_errc_name(baton_errc_t code) {
  if (code == BATON_OK) return "ok";
  if (!baton::capi::known_code(code)) return "unknown";
  // errc_name() returns views of string literals: NUL-terminated.
  return baton::errc_name(static_cast<baton::Errc>(code)).data();
}

int baton_errc_retryable(baton_errc_t code) {
  return baton::capi::known_code(code) &&
         baton::errc_retryable(static_cast<baton::Errc>(code));
}

baton_errc_t baton_error_code(const baton_error_t* err) {
  return err ? static_cast<baton_errc_t>(err->error.code()) : BATON_OK;
}

const char* baton_error_message(const baton_error_t* err) {
  return err ? err->error.message().c_str() : "";
}

int baton_error_retryable(const baton_error_t* err) {
  return err && err->error.retryable();
}

const baton_holders_t* baton_error_holders(const baton_error_t* err) {
  return err ? &err->holders : nullptr;
}

int64_t baton_error_retry_after_ms(const baton_error_t* err) {
  return err ? err->error.retry_after().count() : 0;
}

void baton_error_destroy(baton_error_t* err) {
  if (err && !err->is_static) delete err;
}

size_t baton_holders_count(const baton_holders_t* h) {
  return h ? h->items.size() : 0;
}

namespace {
const baton::HolderInfo* holder_at(const baton_holders_t* h, size_t i) {
  return h && i < h->items.size() ? &h->items[i] : nullptr;
}
}  // namespace

const char* baton_holders_label(const baton_holders_t* h, size_t i) {
  const auto* x = holder_at(h, i);
  return x ? x->label.c_str() : nullptr;
}
uint64_t baton_holders_fencing_token(const baton_holders_t* h, size_t i) {
  const auto* x = holder_at(h, i);
  return x ? x->fencing_token : 0;
}
int64_t baton_holders_time_left_ms(const baton_holders_t* h, size_t i) {
  const auto* x = holder_at(h, i);
  return x ? x->time_left.count() : 0;
}
uint32_t baton_holders_holds(const baton_holders_t* h, size_t i) {
  const auto* x = holder_at(h, i);
  return x ? x->holds : 0;
}
int baton_holders_shared(const baton_holders_t* h, size_t i) {
  const auto* x = holder_at(h, i);
  return x ? x->shared : 0;
}

baton_error_t* baton_token_random(char out[33]) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = baton::capi::require(out, "out")) return e;
    const std::string hex = baton::OwnerToken::random().to_string();
    std::memcpy(out, hex.c_str(), 33);
    return nullptr;
  });
}

baton_error_t* baton_parse_duration(const char* text, int64_t* ms) {
  return guarded([&]() -> baton_error_t* {
    if (ms) *ms = 0;
    if (auto* e = baton::capi::require(ms, "ms")) return e;
    if (auto* e = baton::capi::require(text, "duration")) return e;
    auto d = baton::parse_duration(text);
    if (!d.ok()) return baton::capi::make_error(std::move(d).error());
    *ms = d->count();
    return nullptr;
  });
}

baton_cancel_t* baton_cancel_new(void) {
  return new (std::nothrow) baton_cancel;
}
void baton_cancel_request(baton_cancel_t* c) {
  // Runs the stop callbacks of the calls using it: each only wakes a
  // helper thread (no store I/O on the caller's thread).
  if (c) c->source.request_stop();
}
int baton_cancel_requested(const baton_cancel_t* c) {
  return c && c->source.stop_requested();
}
void baton_cancel_destroy(baton_cancel_t* c) { delete c; }

}  // extern "C"
