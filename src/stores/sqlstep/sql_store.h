// stores/sqlstep/sql_store.h — what the Store classes of the table-backed
// SQL stores (mysql://, sqlite://) share beyond the step: describe() and
// list()'s last part from the rows, the three counter calls, shared mode,
// and the options both declare.
//
// No I/O here. Thread safety: as the derived store (Store contract).
#ifndef BATON_STORES_SQLSTEP_SQL_STORE_H_
#define BATON_STORES_SQLSTEP_SQL_STORE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/store.h"
#include "baton/store_descriptor.h"

namespace baton::store::sqlstep {

enum class CounterOp { get, add, take };

class StepStore : public baton::Store {
 public:
  // `recheck`: the store's recheck_interval option.
  StepStore(std::string safe_url, milliseconds recheck)
      : safe_url_(std::move(safe_url)), recheck_(recheck) {}

  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override;
  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx) override {
    return counter(ctx, CounterOp::get, name, 0);
  }
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx) override {
    return counter(ctx, CounterOp::add, name, delta);
  }
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx) override {
    return counter(ctx, CounterOp::take, name, n);
  }
  bool supports_shared() const override { return true; }
  // Waiters are woken by the store's bells and look again when something
  // is due; this bounds a wait nothing else ends.
  milliseconds recheck_interval() const override { return recheck_; }
  std::string safe_url() const override { return safe_url_; }

 protected:
  // describe() of each of `names` from one read of their rows.
  virtual Result<std::vector<LockInfo>> infos(
      const CallContext& ctx, const std::vector<std::string>& names) = 0;
  virtual Result<std::int64_t> counter(const CallContext& ctx, CounterOp op,
                                       std::string_view name,
                                       std::int64_t n) = 0;
  // list(): the locks among `names` (a query's answer, sorted) that still
  // have holders or waiters when their rows are read.
  Result<std::vector<LockInfo>> in_use(const CallContext& ctx,
                                       const std::vector<std::string>& names);

 private:
  const std::string safe_url_;
  const milliseconds recheck_;
};

// A table prefix or database name that may go into SQL text unquoted:
// [a-z0-9_]+, at most `max` bytes.
bool valid_identifier(std::string_view s, std::size_t max);

// The options both SQL stores declare, in the shared vocabulary:
// prefix, request_timeout, waiter_timeout, recheck_interval (alias
// recheck_max; `recheck_help` says how the store uses it) and
// max_idle_connections (alias max_idle).
std::vector<OptionSpec> step_options(const std::string& recheck_default,
                                     const std::string& recheck_help);

// The largest count option either store takes.
inline constexpr std::int64_t kMaxCount = 100'000;

}  // namespace baton::store::sqlstep

#endif  // BATON_STORES_SQLSTEP_SQL_STORE_H_
