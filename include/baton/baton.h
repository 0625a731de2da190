/* baton/baton.h — the C ABI of baton (libbaton.so, `pkg-config baton`,
 * find_package(baton) target baton::c). Plain C11; usable from C++.
 *
 *   baton_client_t* client = NULL;
 *   baton_error_t* err = baton_client_open("baton://127.0.0.1:7420", NULL,
 *                                          &client);
 *   if (err) { fprintf(stderr, "%s\n", baton_error_message(err));
 *              baton_error_destroy(err); return 1; }
 *   baton_lease_t* lease = NULL;
 *   err = baton_client_acquire(client, "nightly", 10000, NULL, NULL, &lease);
 *   if (!err) { write(baton_lease_fencing_token(lease));
 *               baton_error_destroy(baton_client_release(client, lease, NULL));
 *               baton_lease_destroy(lease); }
 *   baton_error_destroy(err);
 *   baton_client_destroy(client);
 *
 * The rules of this ABI (docs/c-api.md has them at length):
 *
 * ERRORS. Every fallible call returns baton_error_t*: NULL on success, else
 * an error the caller owns and frees with baton_error_destroy(). Its code
 * is one of baton_errc_t (the names of the C++ baton::Errc), its message
 * names the problem; a not_acquired error carries the holders. On error,
 * out parameters are set to NULL / 0. Bad input (a NULL handle or string
 * where one is required, an out-of-range duration, a malformed token, ...)
 * is BATON_ERRC_INVALID_ARGUMENT, and nothing is changed or sent.
 *
 * OWNERSHIP. Every `_new`, `_open`, `_copy` and every object returned
 * through an out parameter is owned by the caller and freed by the
 * matching `_destroy` (which accepts NULL). A `const char*` or const
 * pointer returned by an accessor is borrowed: it lives as long as the
 * object it came from and must not be freed. Strings passed in are copied
 * (the caller keeps ownership). A keeper, session, elector or counter made
 * from a client keeps what it needs of it: the client may be destroyed
 * first.
 *
 * THREADS. No call holds a library-wide lock while it blocks: a blocking
 * call blocks only its calling thread, so a binding may release its
 * interpreter lock around any call, and should around every one: even a
 * `_destroy` may wait for a callback that is running. Client, keeper, session,
 * elector and counter handles may be used from any number of threads at once,
 * except that `_destroy` must not race any other call on the same handle (and
 * baton_keeper_release() not baton_keeper_destroy()). Value objects
 * (errors, leases, lock infos, lists, options) are not synchronized:
 * concurrent reads are fine, a write (a setter, `_destroy`) must not race
 * anything on the same object. A call reads its options only while it
 * runs; several concurrent calls may share one options object.
 *
 * DURATIONS are int64_t milliseconds. A wait of 0 means "try once, do not
 * wait"; BATON_FOREVER means "no end"; negative values are refused. A TTL
 * is 1 ms .. 7 days. Instants (`_ns` functions) are nanoseconds on
 * CLOCK_MONOTONIC (Python: time.monotonic_ns()).
 *
 * CALLBACKS receive the `void* user` given with them and run on a library
 * thread named at each setter, never on the caller's thread. They must
 * return quickly; pointers they receive are valid only during the call.
 *
 * FORK. A client (and every handle made from it) belongs to the process
 * that opened it: its threads and connections do not exist in a child of
 * fork(). Any call on it in the child answers BATON_ERRC_INVALID_ARGUMENT
 * ("this baton client was made in process P and is used in process C after
 * fork(): ... open a new client in the child"), checked without a system
 * call. Its `_destroy` in the child frees nothing of the parent's state and
 * is safe. A child may open clients of its own.
 *
 * STABILITY. Functions are only ever added within one SONAME
 * (libbaton.so.0); removing or changing a function, a callback signature or
 * an enum value bumps it. Handles are opaque, so their contents may change.
 */
#ifndef BATON_BATON_H_
#define BATON_BATON_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ---- Version ---------------------------------------------------------- */

#define BATON_VERSION_MAJOR 0
#define BATON_VERSION_MINOR 1
#define BATON_VERSION_PATCH 0
#define BATON_VERSION_STRING "0.1.0"
/* (major << 16) | (minor << 8) | patch. */
#define BATON_VERSION_NUMBER                                  \
  ((BATON_VERSION_MAJOR << 16) | (BATON_VERSION_MINOR << 8) | \
   BATON_VERSION_PATCH)

/* The library's version as BATON_VERSION_NUMBER / _STRING (which give the
 * header's): a program may compare them. The string is static. */
int baton_version(void);
const char* baton_version_string(void);

/* ---- Errors ----------------------------------------------------------- */

/* The codes of baton::Errc, with the same numbers. */
typedef enum baton_errc {
  BATON_OK = 0,                     /* baton_error_code(NULL) */
  BATON_ERRC_NOT_ACQUIRED = 1,      /* held by others: see the holders */
  BATON_ERRC_TIMEOUT = 2,           /* the wait ended; no trace was left */
  BATON_ERRC_LOCK_LOST = 3,         /* the lease is no longer held */
  BATON_ERRC_INVALID_ARGUMENT = 4,  /* bad input; nothing was changed */
  BATON_ERRC_UNAVAILABLE = 5,       /* store unreachable; retry is safe */
  BATON_ERRC_PERMISSION_DENIED = 6, /* authentication, authorization */
  BATON_ERRC_INTERNAL = 7,          /* a bug: please report it */
  BATON_ERRC_CANCELLED = 8,         /* a baton_cancel_t ended the wait */
  BATON_ERRC_UNSUPPORTED = 9        /* the store lacks the feature */
} baton_errc_t;

typedef struct baton_error baton_error_t;
/* Who holds a lock: a list borrowed from an error or a lock info. */
typedef struct baton_holders baton_holders_t;

/* "not_acquired", "timeout", ... ("ok" for BATON_OK, "unknown" for a
 * value outside the enum). Static strings. */
const char* baton_errc_name(baton_errc_t code);
/* 1 if repeating the same call may succeed (not_acquired, timeout,
 * unavailable), else 0. */
int baton_errc_retryable(baton_errc_t code);

/* Any thread. NULL gives BATON_OK / "" / 0. */
baton_errc_t baton_error_code(const baton_error_t* err);
const char* baton_error_message(const baton_error_t* err);
/* baton_errc_retryable() of the error's code. */
int baton_error_retryable(const baton_error_t* err);
/* With not_acquired: the current holders (possibly none if the store did
 * not say). Never NULL for a non-NULL error (an empty list otherwise). */
const baton_holders_t* baton_error_holders(const baton_error_t* err);
/* With unavailable: in how many milliseconds the store expects to answer
 * (redlock:// while restarted masters serve their restart_guard); 0 if
 * it did not say. NULL gives 0. */
int64_t baton_error_retry_after_ms(const baton_error_t* err);
void baton_error_destroy(baton_error_t* err);

/* An index past the end gives NULL / 0. time_left is in store time. */
size_t baton_holders_count(const baton_holders_t* h);
const char* baton_holders_label(const baton_holders_t* h, size_t i);
uint64_t baton_holders_fencing_token(const baton_holders_t* h, size_t i);
int64_t baton_holders_time_left_ms(const baton_holders_t* h, size_t i);
uint32_t baton_holders_holds(const baton_holders_t* h, size_t i);
int baton_holders_shared(const baton_holders_t* h, size_t i);

/* ---- Durations -------------------------------------------------------- */

/* A wait without end (acquire, campaign). */
#define BATON_FOREVER INT64_MAX

/* Parses a human duration as the CLI and config files write it ("500ms",
 * "30s", "2m", "1h", "7d", "1m30s"; units us, ms, s, m, h, d) into *ms.
 * A number without a unit is refused (except "0"), as are negative
 * values, overflow and sub-millisecond remainders: invalid_argument
 * naming the text. */
baton_error_t* baton_parse_duration(const char* text, int64_t* ms);

/* ---- Owner tokens ----------------------------------------------------- */

/* Writes 32 lowercase hex digits and a NUL into out[33]: 128 random bits
 * from the kernel, for a token to reuse when retrying an acquire whose
 * outcome is unknown, or a reservation of baton_client_acquire_some. */
baton_error_t* baton_token_random(char out[33]);

/* ---- Cancellation ----------------------------------------------------- */

/* A stop switch for blocking calls (acquire, acquire_shared, acquire_some,
 * acquire_all, keeper acquire, campaign). Once requested, every call given
 * it withdraws its request by owner token (nothing stays queued; a lease
 * granted meanwhile is given back) and answers BATON_ERRC_CANCELLED within
 * about one store round trip; a call that starts after the request answers
 * it at once without sending anything. One-shot: it cannot be reset.
 * _new returns NULL only when out of memory. baton_cancel_request and
 * _requested may be called from any thread, concurrently with the calls
 * using it; they never block and do no I/O (not async-signal-safe). The
 * calls using it keep what they need: destroy it once no thread will call
 * _request on it. */
typedef struct baton_cancel baton_cancel_t;
baton_cancel_t* baton_cancel_new(void);
void baton_cancel_request(baton_cancel_t* c);
int baton_cancel_requested(const baton_cancel_t* c);
void baton_cancel_destroy(baton_cancel_t* c);

/* ---- Client options --------------------------------------------------- */

/* Setters check their value (invalid_argument, the object unchanged). */
typedef struct baton_client_options baton_client_options_t;
baton_client_options_t* baton_client_options_new(void); /* NULL: no memory */
void baton_client_options_destroy(baton_client_options_t* o);
/* Default owner label; NULL or "" = "host:pid:program". <= 256 bytes. */
baton_error_t* baton_client_options_set_label(baton_client_options_t* o,
                                              const char* label);
/* The longest any call waits for the store beyond its own wait (connect,
 * round trip and retries). > 0; default 5000. */
baton_error_t* baton_client_options_set_request_timeout(
    baton_client_options_t* o, int64_t ms);
/* First pause between retries after `unavailable` (x2 up to 2 s). >= 0;
 * default 100. */
baton_error_t* baton_client_options_set_retry_interval(
    baton_client_options_t* o, int64_t ms);
/* Retries of one call after `unavailable`; >= 0, 0 = none; default 3. */
baton_error_t* baton_client_options_set_max_retries(baton_client_options_t* o,
                                                    int retries);
/* The drift allowance of the local safe deadline: ttl * factor + floor.
 * factor in [0, 0.5), floor >= 0; default 0.01 and 2 ms. */
baton_error_t* baton_client_options_set_drift(baton_client_options_t* o,
                                              double factor, int64_t floor_ms);

/* ---- Acquire options -------------------------------------------------- */

typedef struct baton_acquire_options baton_acquire_options_t;
baton_acquire_options_t* baton_acquire_options_new(void); /* NULL: no mem */
void baton_acquire_options_destroy(baton_acquire_options_t* o);
/* Lease TTL, 1 ms .. 7 days; default 30000. */
baton_error_t* baton_acquire_options_set_ttl(baton_acquire_options_t* o,
                                             int64_t ms);
/* 1 = mutex (default); N > 1 = semaphore of N holders. */
baton_error_t* baton_acquire_options_set_capacity(baton_acquire_options_t* o,
                                                  uint32_t capacity);
/* Owner label shown by describe; NULL or "" = the client's. */
baton_error_t* baton_acquire_options_set_label(baton_acquire_options_t* o,
                                               const char* label);
/* Opt-in reentrancy: requests with the same non-empty key on a lock share
 * one lease with a hold count. NULL or "" = not reentrant. Checked by the
 * call (<= 512 bytes). */
baton_error_t* baton_acquire_options_set_reentrancy_key(
    baton_acquire_options_t* o, const char* key);
/* The owner token (request id), 32 hex digits; NULL = a fresh random token
 * per call (default). Reuse it to retry a call whose outcome is unknown. */
baton_error_t* baton_acquire_options_set_token(baton_acquire_options_t* o,
                                               const char* hex);

/* ---- Client ----------------------------------------------------------- */

typedef struct baton_client baton_client_t;
typedef struct baton_lease baton_lease_t;
typedef struct baton_lease_list baton_lease_list_t;
typedef struct baton_lock_info baton_lock_info_t;
typedef struct baton_lock_list baton_lock_list_t;

/* Opens the store at `url` (memory:, memory:<name>, baton://host:port,
 * postgres://..., redis://..., redlock://h1,h2,h3, zookeeper://...,
 * mysql://..., etcd://..., sqlite:///path; docs/stores/). `options` may be
 * NULL (defaults). invalid_argument for an unknown or malformed URL or bad
 * options; unavailable if the store cannot be reached. */
baton_error_t* baton_client_open(const char* url,
                                 const baton_client_options_t* options,
                                 baton_client_t** out);
/* Drops this handle. Leases are not released (they expire by their TTL);
 * keepers, sessions, electors and counters made from it go on working. */
void baton_client_destroy(baton_client_t* client);
/* The default owner label and the URL with secrets masked (borrowed). */
const char* baton_client_label(const baton_client_t* client);
const char* baton_client_url(const baton_client_t* client);

/* In all acquire calls: `options` may be NULL (defaults), `cancel` may be
 * NULL (not cancellable); *out receives a lease the caller owns. */

/* Granted at once, or not_acquired with the holders. */
baton_error_t* baton_client_try_acquire(baton_client_t* client,
                                        const char* name,
                                        const baton_acquire_options_t* options,
                                        baton_lease_t** out);
/* Waits in FIFO order at most wait_ms (0 = try, BATON_FOREVER); timeout
 * leaves no trace; a cancel ends it with cancelled. */
baton_error_t* baton_client_acquire(baton_client_t* client, const char* name,
                                    int64_t wait_ms,
                                    const baton_acquire_options_t* options,
                                    baton_cancel_t* cancel,
                                    baton_lease_t** out);
/* A shared (read) lease: many at once, or one exclusive; one FIFO queue for
 * both kinds. Needs capacity 1 and no reentrancy key; unsupported on a
 * store without shared mode. */
baton_error_t* baton_client_acquire_shared(
    baton_client_t* client, const char* name, int64_t wait_ms,
    const baton_acquire_options_t* options, baton_cancel_t* cancel,
    baton_lease_t** out);
/* Extend-to: the lease now lasts ttl_ms from the store's receipt (0 = the
 * lease's own TTL). *out is the renewed lease (a new object; `lease` is
 * unchanged). lock_lost if it is no longer held; nothing changes then. */
baton_error_t* baton_client_extend(baton_client_t* client,
                                   const baton_lease_t* lease, int64_t ttl_ms,
                                   baton_lease_t** out);
/* Gives back one hold. *released (may be NULL) = 1 if it was held, 0 if it
 * no longer was (idempotent). Another owner's lease is never freed. */
baton_error_t* baton_client_release(baton_client_t* client,
                                    const baton_lease_t* lease, int* released);
/* Holders, waiters and the last fencing token of one lock (free locks
 * too). Owner tokens are never included. */
baton_error_t* baton_client_describe(baton_client_t* client, const char* name,
                                     baton_lock_info_t** out);
/* Held or waited-on locks whose names start with `prefix` (NULL or "" =
 * all), by name, at most `limit` (>= 1). */
baton_error_t* baton_client_list(baton_client_t* client, const char* prefix,
                                 size_t limit, baton_lock_list_t** out);
/* Partial grant: one request per name under the reservation token (32 hex
 * digits; reuse it to ask again for the rest). Waits up to wait_ms for at
 * least one grant; *out lists every lease granted so far (possibly none).
 * Requests not yet granted stay queued until the TTL after this call.
 * 1..1024 distinct names; no reentrancy key. */
baton_error_t* baton_client_acquire_some(baton_client_t* client,
                                         const char* const* names, size_t count,
                                         const char* reservation,
                                         int64_t wait_ms,
                                         const baton_acquire_options_t* options,
                                         baton_cancel_t* cancel,
                                         baton_lease_list_t** out);
/* All-or-nothing: every name or none within wait_ms. */
baton_error_t* baton_client_acquire_all(baton_client_t* client,
                                        const char* const* names, size_t count,
                                        int64_t wait_ms,
                                        const baton_acquire_options_t* options,
                                        baton_cancel_t* cancel,
                                        baton_lease_list_t** out);

/* ---- Leases (values: no I/O) ------------------------------------------ */

/* A lease known only by its name and owner token (fencing token 0, no
 * local deadline): to release or extend by token what another process
 * acquired. ttl_ms 1 ms .. 7 days is what a 0 extend renews. */
baton_error_t* baton_lease_new(const char* name, const char* token_hex,
                               int64_t ttl_ms, baton_lease_t** out);
/* A copy the caller owns (NULL when out of memory). */
baton_lease_t* baton_lease_copy(const baton_lease_t* lease);
void baton_lease_destroy(baton_lease_t* lease);
const char* baton_lease_name(const baton_lease_t* lease);
/* The owner token, 32 hex digits: a secret (whoever has it can release). */
const char* baton_lease_token(const baton_lease_t* lease);
/* Strictly increasing per lock name: send it with every protected write. */
uint64_t baton_lease_fencing_token(const baton_lease_t* lease);
int64_t baton_lease_ttl_ms(const baton_lease_t* lease);
uint32_t baton_lease_holds(const baton_lease_t* lease); /* reentrant */
uint32_t baton_lease_capacity(const baton_lease_t* lease);
int baton_lease_shared(const baton_lease_t* lease);
/* The local safe deadline: treat the lease as held only before it. */
int64_t baton_lease_local_deadline_ns(const baton_lease_t* lease);
/* Until the local safe deadline, >= 0. */
int64_t baton_lease_time_left_ms(const baton_lease_t* lease);
/* The store's own expiry, ms since the Unix epoch on the store's clock
 * (informational: never compare it with local time). */
int64_t baton_lease_store_expires_at_ms(const baton_lease_t* lease);

size_t baton_lease_list_count(const baton_lease_list_t* list);
/* Borrowed; NULL past the end. baton_lease_copy() to keep one. */
const baton_lease_t* baton_lease_list_get(const baton_lease_list_t* list,
                                          size_t i);
void baton_lease_list_destroy(baton_lease_list_t* list);

/* ---- Lock descriptions (values) --------------------------------------- */

const char* baton_lock_info_name(const baton_lock_info_t* info);
uint32_t baton_lock_info_capacity(const baton_lock_info_t* info);
/* >= every fencing token granted on the name so far. */
uint64_t baton_lock_info_last_fencing_token(const baton_lock_info_t* info);
int baton_lock_info_is_free(const baton_lock_info_t* info);
const baton_holders_t* baton_lock_info_holders(const baton_lock_info_t* info);
/* Waiters in queue order; an index past the end gives NULL / 0. */
size_t baton_lock_info_waiter_count(const baton_lock_info_t* info);
const char* baton_lock_info_waiter_label(const baton_lock_info_t* info,
                                         size_t i);
int64_t baton_lock_info_waiter_waited_ms(const baton_lock_info_t* info,
                                         size_t i);
int baton_lock_info_waiter_all_or_nothing(const baton_lock_info_t* info,
                                          size_t i);
int baton_lock_info_waiter_shared(const baton_lock_info_t* info, size_t i);
void baton_lock_info_destroy(baton_lock_info_t* info);

size_t baton_lock_list_count(const baton_lock_list_t* list);
const baton_lock_info_t* baton_lock_list_get(const baton_lock_list_t* list,
                                             size_t i); /* borrowed */
void baton_lock_list_destroy(baton_lock_list_t* list);

/* ---- Keepers and sessions: renewal and the lost notice ---------------- */

/* A lost notice: `why` (borrowed) says lock_lost and how. */
typedef void (*baton_lost_fn)(const baton_error_t* why, void* user);

typedef struct baton_keeper_options baton_keeper_options_t;
baton_keeper_options_t* baton_keeper_options_new(void); /* NULL: no mem */
void baton_keeper_options_destroy(baton_keeper_options_t* o);
/* Renew this often; 0 (default) = a third of the lease's window. >= 0. */
baton_error_t* baton_keeper_options_set_renew_interval(
    baton_keeper_options_t* o, int64_t ms);
/* Called once when the lease is lost: a renewal answered lock_lost, or the
 * local safe deadline passed before a renewal succeeded (then at that
 * instant, whatever the store does). It runs on the session's notice
 * thread, after the flag (baton_keeper_lost) is set and before the lost
 * lease is given back. It delays the notices of the other leases of the
 * session while it runs: it must not block, nor wait for a lock another
 * thread may hold for long (a binding's interpreter lock: use the fd or
 * the flag instead). It may release or destroy handles, but releasing a
 * lease still held does store I/O on this thread. NULL = none. */
baton_error_t* baton_keeper_options_set_on_lost(baton_keeper_options_t* o,
                                                baton_lost_fn fn, void* user);
/* At the loss, just before on_lost, the notice thread writes the 8-byte
 * value 1 to `fd` (an eventfd, or a pipe's write end; make it non-blocking:
 * a full pipe is not waited for). The library does not close it: keep it
 * open until the keeper is destroyed. -1 = none (default). */
baton_error_t* baton_keeper_options_set_lost_fd(baton_keeper_options_t* o,
                                                int fd);

/* One lease kept alive (extend-to every renew interval) with a lost notice.
 * Destroying it stops renewal and releases the lease if still held
 * (blocking, bounded by the client's request timeout). */
typedef struct baton_keeper baton_keeper_t;

/* Acquires `name` (waiting up to wait_ms; 0 = try) and keeps it in the
 * client's default session. keeper_options may be NULL. */
baton_error_t* baton_keeper_acquire(
    baton_client_t* client, const char* name, int64_t wait_ms,
    const baton_acquire_options_t* options,
    const baton_keeper_options_t* keeper_options, baton_cancel_t* cancel,
    baton_keeper_t** out);
/* The same with a shared lease. */
baton_error_t* baton_keeper_acquire_shared(
    baton_client_t* client, const char* name, int64_t wait_ms,
    const baton_acquire_options_t* options,
    const baton_keeper_options_t* keeper_options, baton_cancel_t* cancel,
    baton_keeper_t** out);
/* Takes over renewal of a lease already held (copied), in the client's
 * default session. */
baton_error_t* baton_keeper_new(baton_client_t* client,
                                const baton_lease_t* lease,
                                const baton_keeper_options_t* keeper_options,
                                baton_keeper_t** out);
/* A snapshot of the lease as last renewed (the caller owns it). */
baton_error_t* baton_keeper_lease(const baton_keeper_t* k, baton_lease_t** out);
/* The pollable flag: 1 once the lease is lost or released (or the local
 * safe deadline has passed), else 0. Lock-free, never blocks; 1 in a
 * forked child. */
int baton_keeper_lost(const baton_keeper_t* k);
/* The current local safe deadline (moves with every renewal); 0 in a
 * forked child. Lock-free. */
int64_t baton_keeper_safe_deadline_ns(const baton_keeper_t* k);
/* Stops renewal and releases now. *released (may be NULL) = 1 if the lease
 * was still held, 0 if it was already lost (then the store is not asked). */
baton_error_t* baton_keeper_release(baton_keeper_t* k, int* released);
void baton_keeper_destroy(baton_keeper_t* k);

/* A session: its own renewal and notice threads for a group of leases, and
 * one point of release (destroying it releases every lease it still keeps,
 * each bounded by the request timeout). Its keepers may outlive it. */
typedef struct baton_session baton_session_t;
baton_error_t* baton_session_new(baton_client_t* client, baton_session_t** out);
/* Starts keeping `lease` (already acquired; copied) in this session. */
baton_error_t* baton_session_keep(baton_session_t* s,
                                  const baton_lease_t* lease,
                                  const baton_keeper_options_t* keeper_options,
                                  baton_keeper_t** out);
/* Leases kept now (lost and released ones not counted); 0 in a child. */
size_t baton_session_size(const baton_session_t* s);
void baton_session_destroy(baton_session_t* s);

/* ---- Leader election -------------------------------------------------- */

typedef void (*baton_elected_fn)(const baton_lease_t* lease, void* user);
typedef void (*baton_leader_fn)(const char* label, void* user);

typedef struct baton_elector_options baton_elector_options_t;
baton_elector_options_t* baton_elector_options_new(void); /* NULL: no mem */
void baton_elector_options_destroy(baton_elector_options_t* o);
/* The leader lease's TTL, 1 ms .. 7 days; default 15000. */
baton_error_t* baton_elector_options_set_ttl(baton_elector_options_t* o,
                                             int64_t ms);
/* Renew (leader) and re-check (candidate) interval; 0 (default) = TTL/3. */
baton_error_t* baton_elector_options_set_retry_interval(
    baton_elector_options_t* o, int64_t ms);
/* This candidate's label as observed; NULL or "" = the client's. */
baton_error_t* baton_elector_options_set_label(baton_elector_options_t* o,
                                               const char* label);
/* On the elector's own thread, once per won campaign, before campaign()
 * returns. `lease` is the term's lease (borrowed). */
baton_error_t* baton_elector_options_set_on_elected(baton_elector_options_t* o,
                                                    baton_elected_fn fn,
                                                    void* user);
/* On the elector's own thread, while a campaign waits: the leader it
 * observes changed (`label` borrowed). */
baton_error_t* baton_elector_options_set_on_new_leader(
    baton_elector_options_t* o, baton_leader_fn fn, void* user);
/* On the session's notice thread (same rules as the keeper's on_lost),
 * when the term is lost; baton_elector_cancelled() is 1 by then. */
baton_error_t* baton_elector_options_set_on_lost(baton_elector_options_t* o,
                                                 baton_lost_fn fn, void* user);
/* As baton_keeper_options_set_lost_fd, for the loss of a term. */
baton_error_t* baton_elector_options_set_lost_fd(baton_elector_options_t* o,
                                                 int fd);

/* A candidate for leadership of the lock named `group` (capacity 1).
 * Callbacks must not call campaign or resign of their own elector; they
 * may destroy it (the destruction then finishes on another thread).
 * Destroying it resigns (blocking, bounded by the request timeout). */
typedef struct baton_elector baton_elector_t;
typedef struct baton_leader baton_leader_t;

baton_error_t* baton_elector_new(baton_client_t* client, const char* group,
                                 const baton_elector_options_t* options,
                                 baton_elector_t** out);
/* Blocks until this candidate is leader (success) or wait_ms passes
 * (timeout); a cancel (or resign from another thread) ends it, withdrawn.
 * Success at once if already leader; invalid_argument if a campaign of
 * this elector is already running. */
baton_error_t* baton_elector_campaign(baton_elector_t* e, int64_t wait_ms,
                                      baton_cancel_t* cancel);
/* Gives up leadership, or ends a waiting campaign. Idempotent. */
baton_error_t* baton_elector_resign(baton_elector_t* e);
/* The current leader (any candidate's), or not_acquired if none. */
baton_error_t* baton_elector_observe(const baton_elector_t* e,
                                     baton_leader_t** out);
/* Lock-free flags: leader now; the term was lost or resigned (cleared by a
 * new campaign). In a forked child: 0 and 1. */
int baton_elector_is_leader(const baton_elector_t* e);
int baton_elector_cancelled(const baton_elector_t* e);
/* The current term's lease (caller owns); not_acquired if not leader. */
baton_error_t* baton_elector_lease(const baton_elector_t* e,
                                   baton_lease_t** out);
/* The term's local safe deadline; 0 when not leader or in a child. */
int64_t baton_elector_safe_deadline_ns(const baton_elector_t* e);
void baton_elector_destroy(baton_elector_t* e);

const char* baton_leader_label(const baton_leader_t* l);
uint64_t baton_leader_fencing_token(const baton_leader_t* l); /* the term */
int64_t baton_leader_time_left_ms(const baton_leader_t* l);
void baton_leader_destroy(baton_leader_t* l);

/* ---- Counters --------------------------------------------------------- */

/* An atomic int64 stored beside the locks; each call is one store
 * operation, never retried (a lost reply leaves its effect unknown). */
typedef struct baton_counter baton_counter_t;
baton_error_t* baton_counter_new(baton_client_t* client, const char* name,
                                 baton_counter_t** out);
const char* baton_counter_name(const baton_counter_t* c);
/* The value (0 if never written). */
baton_error_t* baton_counter_get(baton_counter_t* c, int64_t* value);
/* Adds delta (may be negative); *value = the new value. invalid_argument
 * if the result would overflow. `value` may be NULL. */
baton_error_t* baton_counter_add(baton_counter_t* c, int64_t delta,
                                 int64_t* value);
/* Takes n >= 1 only if the result stays >= 0 (else not_acquired and
 * nothing changes); *value = the new value. `value` may be NULL. */
baton_error_t* baton_counter_take(baton_counter_t* c, int64_t n,
                                  int64_t* value);
void baton_counter_destroy(baton_counter_t* c);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BATON_BATON_H_ */
