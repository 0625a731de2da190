// core/error.cc — error codes, Error::to_string and Result<void>.
#include "baton/error.h"

#include <cstdio>
#include <cstdlib>

namespace baton {

namespace {
struct Name {
  Errc code;
  std::string_view name;
};
constexpr Name kNames[] = {
    {Errc::not_acquired, "not_acquired"},
    {Errc::timeout, "timeout"},
    {Errc::lock_lost, "lock_lost"},
    {Errc::invalid_argument, "invalid_argument"},
    {Errc::unavailable, "unavailable"},
    {Errc::permission_denied, "permission_denied"},
    {Errc::internal, "internal"},
    {Errc::cancelled, "cancelled"},
    {Errc::unsupported, "unsupported"},
};
}  // namespace

std::string_view errc_name(Errc code) noexcept {
  for (const Name& n : kNames) {
    if (n.code == code) return n.name;
  }
  return "unknown";
}

bool errc_from_name(std::string_view name, Errc* out) noexcept {
  for (const Name& n : kNames) {
    if (n.name == name) {
      if (out != nullptr) *out = n.code;
      return true;
    }
  }
  return false;
}

bool errc_retryable(Errc code) noexcept {
  return code == Errc::not_acquired || code == Errc::timeout ||
         code == Errc::unavailable;
}

std::string Error::to_string() const {
  std::string out(errc_name(code_));
  out += ": ";
  out += message_;
  return out;
}

void Result<void>::value() const {
  if (!ok_) detail::bad_result_access(true, &err_);
}

const Error& Result<void>::error() const& {
  if (ok_) detail::bad_result_access(false, nullptr);
  return err_;
}

Error&& Result<void>::error() && {
  if (ok_) detail::bad_result_access(false, nullptr);
  return std::move(err_);
}

namespace detail {
void bad_result_access(bool wanted_value, const Error* err) {
  if (wanted_value) {
    std::fprintf(stderr,
                 "baton: Result::value() called on an error result (%s)\n",
                 err != nullptr ? err->to_string().c_str() : "unknown error");
  } else {
    std::fprintf(stderr, "baton: Result::error() called on a success result\n");
  }
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace baton
