// baton/error.h — the error model: one fixed set of codes and Result<T>.
//
// Every fallible baton call returns Result<T> (or Status = Result<void>):
// either a value or an Error. There are no sentinel values. Each code says
// whether retrying the same call can help:
//
//   code               retry?  meaning
//   not_acquired       later   the lock is held by others (Error::holders says
//                              by whom and until when); try again later.
//   timeout            later   a blocking call's wait deadline passed; the
//                              request left no trace in the store's queue.
//   lock_lost          no      the lease is no longer held (expired, released,
//                              or taken over); acquire anew.
//   invalid_argument   no      bad input (name, TTL, capacity, URL, frame);
//                              nothing was changed. The message names it.
//   unavailable        yes     the store could not be reached or did not
//                              answer; retrying with the same owner token is
//                              safe (docs/contract.md#rule-17).
//   permission_denied  no      authentication or authorization failed.
//   internal           no      a bug or a broken invariant; report it.
//   unsupported        no      the store does not offer this feature (e.g.
//                              shared mode); the message names the store.
//
// Thread safety: Error and Result are values; distinct objects may be used
// from distinct threads freely, one object is not synchronized.
#ifndef BATON_ERROR_H_
#define BATON_ERROR_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace baton {

enum class Errc : std::uint8_t {
  not_acquired = 1,
  timeout,
  lock_lost,
  invalid_argument,
  unavailable,
  permission_denied,
  internal,
  // A blocking wait ended by its caller (AcquireOptions::stop); the request
  // was withdrawn. Never sent by a store.
  cancelled,
  // The store does not offer the requested feature (shared mode on a store
  // without it); nothing was changed. The message names the store.
  unsupported,
};

// "not_acquired", "timeout", ... (stable; used in protocols and CLI output).
std::string_view errc_name(Errc code) noexcept;
// Parses errc_name() output; returns false if unknown.
bool errc_from_name(std::string_view name, Errc* out) noexcept;
// True for codes where repeating the same call may succeed.
bool errc_retryable(Errc code) noexcept;

// Who holds a lock, as reported with not_acquired and by describe().
struct HolderInfo {
  std::string label;                       // human-readable owner label
  std::uint64_t fencing_token = 0;         // the holder's fencing token
  std::chrono::milliseconds time_left{0};  // until expiry, in store time
  std::uint32_t holds = 1;                 // reentrant hold count
  bool shared = false;  // a shared (read) lease, else exclusive
};

class Error {
 public:
  Error() = default;
  Error(Errc code, std::string message)
      : code_(code), message_(std::move(message)) {}

  Errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  bool retryable() const noexcept { return errc_retryable(code_); }

  // With not_acquired: the current holders (may be empty if unknown).
  const std::vector<HolderInfo>& holders() const noexcept { return holders_; }
  Error& with_holders(std::vector<HolderInfo> h) & {
    holders_ = std::move(h);
    return *this;
  }
  Error&& with_holders(std::vector<HolderInfo> h) && {
    holders_ = std::move(h);
    return std::move(*this);
  }

  // With unavailable: when the store expects to answer, if it knows (0:
  // it does not). A blocking acquire whose wait lasts that long waits it
  // out and tries again (not counted among its retries); one whose wait
  // ends first answers this error at once. Other calls take it as the
  // pause before a retry (ClientOptions::max_retries). redlock:// sets it
  // while instances restarted without their data serve their
  // restart_guard.
  std::chrono::milliseconds retry_after() const noexcept {
    return retry_after_;
  }
  Error& with_retry_after(std::chrono::milliseconds d) & {
    retry_after_ = d;
    return *this;
  }
  Error&& with_retry_after(std::chrono::milliseconds d) && {
    retry_after_ = d;
    return std::move(*this);
  }

  // "<code>: <message>", e.g. "invalid_argument: lock name is empty".
  std::string to_string() const;

 private:
  Errc code_ = Errc::internal;
  std::string message_;
  std::vector<HolderInfo> holders_;
  std::chrono::milliseconds retry_after_{0};
};

// Result<T>: a value or an Error. Accessing value() of an error result (or
// error() of a value) is a programming error and aborts.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT
  Result(Error error)
      : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return check_value(), std::get<0>(v_); }
  const T& value() const& { return check_value(), std::get<0>(v_); }
  T&& value() && { return check_value(), std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { return check_error(), std::get<1>(v_); }
  Error&& error() && { return check_error(), std::get<1>(std::move(v_)); }

  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? std::get<0>(v_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  void check_value() const;
  void check_error() const;
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  void value() const;
  const Error& error() const&;
  Error&& error() &&;

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

namespace detail {
[[noreturn]] void bad_result_access(bool wanted_value, const Error* err);
}  // namespace detail

template <typename T>
void Result<T>::check_value() const {
  if (!ok()) detail::bad_result_access(true, &std::get<1>(v_));
}
template <typename T>
void Result<T>::check_error() const {
  if (ok()) detail::bad_result_access(false, nullptr);
}

}  // namespace baton

#endif  // BATON_ERROR_H_
