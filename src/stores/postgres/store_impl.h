// stores/postgres/store_impl.h — the postgres:// store's class, shared by
// its single calls (postgres_store.cc) and its requests (requests.cc).
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_POSTGRES_STORE_IMPL_H_
#define BATON_STORES_POSTGRES_STORE_IMPL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/store.h"
#include "stores/busy_names.h"
#include "stores/postgres/listener.h"
#include "stores/postgres/postgres_store.h"
#include "stores/postgres/rows.h"

namespace baton::store::pg {

// One statement, prepared once per connection under `name` (a hash of its
// text).
struct Stmt {
  explicit Stmt(std::string sql);
  std::string name, text;
};

// The SQL of every call, for one schema.
struct Statements {
  explicit Statements(const std::string& schema);
  Stmt acquire, multi, extend, release, describe, list, counter, fast_acquire,
      fast_release;
};

class PgStore final : public baton::Store {
 public:
  PgStore(StoreOptions o, ConnParams params, std::string where,
          std::string safe_url);

  // Installs or migrates the schema and starts the listener.
  Status open();

  std::unique_ptr<Request> request(const AcquireSpec& spec) override;
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override;
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override;
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override;
  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override;
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override;
  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx) override;
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx) override;
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx) override;
  bool supports_shared() const override { return true; }
  milliseconds recheck_interval() const override { return o_.recheck_interval; }
  std::string safe_url() const override { return safe_url_; }

  // --- for the requests (requests.cc) ---

  // One statement; its rows as they are ('error' rows included).
  Result<std::vector<Row>> rows(const Stmt& sql,
                                const std::vector<std::string>& params,
                                const CallContext& ctx,
                                bool may_be_empty = false);
  // acquire(...) in `mode` ('try', 'wait', 'recheck', 'full', 'withdraw').
  Result<std::vector<Row>> call_acquire(const AcquireSpec& spec,
                                        const char* mode,
                                        milliseconds wait_left,
                                        const CallContext& ctx);
  Result<std::vector<Row>> call_multi(const MultiSpec& spec, const char* mode,
                                      milliseconds wait_left,
                                      const CallContext& ctx);
  // Whether to try the one-statement grant first (a plain request on a
  // name not marked busy).
  bool try_fast(const AcquireSpec& spec);
  // The one-statement grant of an idle name (valid_for: from the
  // statement's start); nullopt if it did not grant (the name is busy or
  // new, or the outcome is unknown: the function's pass with the same
  // owner token then finds the lease if the statement committed, rule 17).
  std::optional<Grant> fast_acquire(const AcquireSpec& spec,
                                    const CallContext& ctx);
  BusyNames& busy() { return busy_; }
  Listener& listener() { return *listener_; }

 private:
  // One statement; an 'error' first row becomes the Error it names.
  Result<std::vector<Row>> call(const Stmt& sql,
                                const std::vector<std::string>& params,
                                const CallContext& ctx,
                                bool may_be_empty = false);
  Result<std::int64_t> counter(const char* op, std::string_view name,
                               std::int64_t n, const CallContext& ctx);

  const StoreOptions o_;
  const std::string safe_url_;
  const Statements sql_;
  Pool pool_;
  std::unique_ptr<Listener> listener_;
  BusyNames busy_;
};

}  // namespace baton::store::pg

#endif  // BATON_STORES_POSTGRES_STORE_IMPL_H_
