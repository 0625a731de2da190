// baton/counter.h — an atomic counter stored beside the locks.
//
// Counters beside the locks (docs/contract.md): an inventory of 10 prizes must
// never hand out 11. Each operation is one atomic store operation.
//
// Thread safety: a Counter is a cheap handle; use it from any thread.
#ifndef BATON_COUNTER_H_
#define BATON_COUNTER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "baton/client.h"
#include "baton/error.h"

namespace baton {

class Counter {
 public:
  Counter(Client client, std::string name)
      : client_(std::move(client)), name_(std::move(name)) {}

  // Current value (0 for a counter never written).
  Result<std::int64_t> get() const;
  // Adds `delta` (may be negative) and returns the new value;
  // invalid_argument if the result would overflow int64.
  Result<std::int64_t> add(std::int64_t delta) const;
  // Decrements by n (n >= 1) only if the result stays >= 0 and returns the
  // new value; otherwise not_acquired and nothing changes.
  Result<std::int64_t> take(std::int64_t n = 1) const;

  const std::string& name() const { return name_; }

 private:
  Client client_;
  std::string name_;
};

}  // namespace baton

#endif  // BATON_COUNTER_H_
