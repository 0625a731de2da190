// baton/client.h — the entry point: a client bound to one store URL.
//
//   auto client = baton::Client::open("baton://127.0.0.1:7420");
//   if (!client) { /* client.error().to_string() */ }
//   auto lease = client->acquire("nightly-batch", 10s);   // wait up to 10 s
//   if (lease) { ... write with lease->fencing_token ...;
//   client->release(*lease); }
//
// Every call validates its input first (docs/contract.md#rule-16): a bad name,
// TTL, capacity or URL gives invalid_argument and nothing reaches the store.
// Calls that fail with `unavailable` are retried inside the client with the
// same owner token (rule 17), up to ClientOptions::max_retries.
//
// Thread safety: a Client is a cheap, copyable handle; all copies share one
// connection to the store. Every method may be called concurrently from any
// number of threads. Blocking calls block only the calling thread.
#ifndef BATON_CLIENT_H_
#define BATON_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"
#include "baton/options.h"

namespace baton {

class Counter;
class Store;
class Waitable;

class Client {
 public:
  // Opens a store from its URL: memory:, baton://host:port, postgres://...,
  // redis://..., redlock://h1:p1,h2:p2,... (see docs/stores/). Fails with
  // invalid_argument for an unknown or malformed URL, unavailable if the
  // store cannot be reached.
  static Result<Client> open(std::string_view url, ClientOptions options = {});
  // A client of a store object (baton/store.h): a store written outside
  // this repository, a wrapper that injects faults, or one opened with
  // baton::open_store(). A null store makes every call answer
  // invalid_argument.
  static Client wrap(std::shared_ptr<Store> store, ClientOptions options = {});

  // Rule 6: granted at once, or not_acquired (error().holders() says who
  // holds it and for how long).
  Result<Lease> try_acquire(std::string_view name,
                            const AcquireOptions& options = {}) const;

  // Rule 7/8: waits in FIFO order at most `wait`; timeout leaves no trace.
  Result<Lease> acquire(std::string_view name, std::chrono::milliseconds wait,
                        const AcquireOptions& options = {}) const;

  // Rule 18, read-write locks: a shared (read) lease on `name`. Any number
  // of shared leases may be held at once, or one exclusive lease (acquire /
  // try_acquire on the same name); requests of both kinds wait in one FIFO
  // queue (a reader behind a waiting writer waits). wait 0 = try. Shared
  // mode needs capacity 1 and no reentrancy key (invalid_argument
  // otherwise); a store without shared mode answers `unsupported`.
  Result<Lease> acquire_shared(std::string_view name,
                               std::chrono::milliseconds wait,
                               const AcquireOptions& options = {}) const;

  // Rule 4: extend-to. Returns the renewed lease (new local_deadline), or
  // lock_lost if `lease` is no longer held; nothing changes then.
  Result<Lease> extend(const Lease& lease, std::chrono::milliseconds ttl) const;
  // Extends by the lease's own TTL.
  Result<Lease> extend(const Lease& lease) const {
    return extend(lease, lease.ttl);
  }

  // Rule 5: returns true if the lease (one reentrant hold) was released,
  // false if it was no longer held. Idempotent.
  Result<bool> release(const Lease& lease) const;

  // Rule 15.
  Result<LockInfo> describe(std::string_view name) const;
  // Held or waited-on locks whose names start with `prefix`, by name.
  Result<std::vector<LockInfo>> list(std::string_view prefix = {},
                                     std::size_t limit = 1000) const;

  // A change feed over the locks under `prefix` (Store::watch): its
  // wait_change() returns once one of them may have changed. A null
  // pointer if the store has none (poll list() instead).
  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix = {}) const;

  // Rule 11, partial grant: one request per name under `reservation`
  // (reuse the same token when asking again for the rest). Waits up to
  // `wait` for at least one grant and returns every lease granted so far
  // among `names` (possibly none). Requests not yet granted stay queued
  // until options.ttl after this call.
  Result<std::vector<Lease>> acquire_some(
      const std::vector<std::string>& names, const OwnerToken& reservation,
      std::chrono::milliseconds wait, const AcquireOptions& options = {}) const;

  // Rule 11, all-or-nothing: every name or none, within `wait`.
  Result<std::vector<Lease>> acquire_all(
      const std::vector<std::string>& names, std::chrono::milliseconds wait,
      const AcquireOptions& options = {}) const;

  Counter counter(std::string_view name) const;

  const ClientOptions& options() const;
  // The default owner label ("host:pid:program" unless configured).
  const std::string& label() const;
  // The store URL with secrets masked.
  std::string url() const;
  // Whether a lease stays held after this client (and its process) is gone,
  // until its expiry: true for stores that keep a lease as a row or a key
  // with a TTL; false for zookeeper:// (a lease is an ephemeral node of the
  // client's session) and memory: (in the process). Where it is false, a
  // lease meant to outlast the program must be kept by a live client.
  bool leases_outlive_client() const;

  struct Impl;
  struct ImplAccess;  // internal

 private:
  explicit Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace baton

#endif  // BATON_CLIENT_H_
