// core/request.cc — the checks and the grant conversion of core/request.h.
#include "core/request.h"

#include "baton/validate.h"
#include "core/validate.h"

namespace baton::core {

Status validate_acquire_fields(std::string_view name, Nanos ttl,
                               std::uint64_t capacity, std::string_view label,
                               std::string_view reentrancy_key) {
  if (Status s = validate_name(name); !s.ok()) return s;
  if (Status s = validate_ttl(ttl); !s.ok()) return s;
  if (Status s = validate_capacity(capacity); !s.ok()) return s;
  if (Status s = validate_label(label); !s.ok()) return s;
  return validate_reentrancy_key(reentrancy_key);
}

Status validate_shared(bool shared, std::uint64_t capacity,
                       std::string_view reentrancy_key) {
  if (!shared) return {};
  if (capacity != 1) {
    return Error(Errc::invalid_argument,
                 "shared mode needs capacity 1 (got " +
                     std::to_string(capacity) +
                     "): a read-write lock has one writer or many readers");
  }
  if (!reentrancy_key.empty()) {
    return Error(Errc::invalid_argument,
                 "a reentrancy key cannot be used with shared mode");
  }
  return {};
}

Status validate(const AcquireSpec& spec, milliseconds wait) {
  if (Status s = validate_acquire_fields(spec.name, spec.ttl, spec.capacity,
                                         spec.label, spec.reentrancy_key);
      !s.ok()) {
    return s;
  }
  if (Status s =
          validate_shared(spec.shared, spec.capacity, spec.reentrancy_key);
      !s.ok()) {
    return s;
  }
  if (spec.token.is_zero()) {
    return Error(Errc::invalid_argument, "owner token is zero");
  }
  return validate_wait(wait);
}

Status validate(const MultiSpec& spec, milliseconds wait) {
  std::vector<std::string_view> views(spec.names.begin(), spec.names.end());
  if (Status s = validate_names(views); !s.ok()) return s;
  if (Status s = validate_ttl(spec.ttl); !s.ok()) return s;
  if (Status s = validate_capacity(spec.capacity); !s.ok()) return s;
  if (Status s = validate_label(spec.label); !s.ok()) return s;
  if (spec.reservation.is_zero()) {
    return Error(Errc::invalid_argument, "reservation token is zero");
  }
  return validate_wait(wait);
}

Status validate_lease_call(std::string_view name, const OwnerToken& token,
                           milliseconds ttl) {
  if (Status s = validate_name(name); !s.ok()) return s;
  if (Status s = validate_ttl(ttl); !s.ok()) return s;
  if (token.is_zero()) {
    return Error(Errc::invalid_argument, "lease has a zero owner token");
  }
  return {};
}

Status validate_prefix(std::string_view prefix) {
  if (prefix.empty()) return {};
  return validate_name(prefix, "name prefix");
}

Grant make_grant(std::string name, const OwnerToken& token,
                 std::uint64_t fencing, Nanos ttl, std::uint32_t holds,
                 std::uint32_t capacity, Nanos valid_for, Instant expiry,
                 Instant table_now, std::int64_t wall_now_ms) {
  using std::chrono::duration_cast;
  Grant out;
  out.name = std::move(name);
  out.token = token;
  out.fencing_token = fencing;
  out.ttl = duration_cast<milliseconds>(ttl);
  out.holds = holds;
  out.capacity = capacity;
  out.valid_for = duration_cast<std::chrono::microseconds>(valid_for);
  out.store_expires_at_ms =
      wall_now_ms + duration_cast<milliseconds>(expiry - table_now).count();
  return out;
}

}  // namespace baton::core

// The public checks (baton/validate.h) are core's.
namespace baton {

Status validate_lock_name(std::string_view name, std::string_view what) {
  return core::validate_name(name, what);
}
Status validate_ttl(std::chrono::milliseconds ttl) {
  return core::validate_ttl(ttl);
}
Status validate_wait(std::chrono::milliseconds wait) {
  return core::validate_wait(wait);
}
Status validate_capacity(std::uint64_t capacity) {
  return core::validate_capacity(capacity);
}
Status validate_label(std::string_view label) {
  return core::validate_label(label);
}

}  // namespace baton
