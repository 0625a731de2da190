/* tests/capi/capi_test.c — the C API (include/baton/baton.h) from a C11
 * program: every function, on memory: and on a private batond (baton://).
 * This file: helpers, main, input checks, leases, lists, multi-lock
 * requests and counters; capi_wait_test.c: blocking, cancellation,
 * keepers, sessions, electors and fork. */
#define _POSIX_C_SOURCE 200809L

#include "capi_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char* g_url = "";
int g_batond_pid = 0;
static const char* g_tag = "";

/* Ends the test after a failed check (the message is printed). */
static _Noreturn void die(void) {
  fflush(stderr);
  batond_stop();
  _Exit(1);
}

void capi_fail(const char* file, int line, const char* what,
               const baton_error_t* err) {
  fprintf(stderr, "FAILED [%s] %s:%d: %s", g_url, file, line, what);
  if (err) {
    fprintf(stderr, " -> %s: %s", baton_errc_name(baton_error_code(err)),
            baton_error_message(err));
  }
  fprintf(stderr, "\n");
  die();
}

void capi_expect(const char* file, int line, const char* what,
                 baton_error_t* err, baton_errc_t want) {
  if (!err) {
    fprintf(stderr, "FAILED [%s] %s:%d: %s succeeded; expected %s\n", g_url,
            file, line, what, baton_errc_name(want));
    die();
  }
  if (baton_error_code(err) != want || baton_error_message(err)[0] == '\0') {
    fprintf(stderr, "FAILED [%s] %s:%d: %s -> %s: \"%s\"; expected %s\n", g_url,
            file, line, what, baton_errc_name(baton_error_code(err)),
            baton_error_message(err), baton_errc_name(want));
    die();
  }
  baton_error_destroy(err);
}

int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
int64_t now_ms(void) { return now_ns() / 1000000; }

void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

const char* name_of(const char* what) {
  /* A few names live at once in a test: a ring of buffers. */
  static char ring[8][128];
  static int next = 0;
  char* buf = ring[next++ % 8];
  snprintf(buf, sizeof ring[0], "capi/%s/%s", g_tag, what);
  return buf;
}

int eventually(int (*cond)(void* arg), void* arg, int64_t ms) {
  const int64_t end = now_ms() + ms;
  while (!cond(arg) && now_ms() < end) sleep_ms(5);
  return cond(arg);
}

size_t waiters_of(baton_client_t* c, const char* name) {
  baton_lock_info_t* info = NULL;
  CHECK_OK(baton_client_describe(c, name, &info));
  const size_t n = baton_lock_info_waiter_count(info);
  baton_lock_info_destroy(info);
  return n;
}

size_t holders_of(baton_client_t* c, const char* name) {
  baton_lock_info_t* info = NULL;
  CHECK_OK(baton_client_describe(c, name, &info));
  const size_t n = baton_holders_count(baton_lock_info_holders(info));
  baton_lock_info_destroy(info);
  return n;
}

static baton_acquire_options_t* options(int64_t ttl_ms, const char* label) {
  baton_acquire_options_t* o = baton_acquire_options_new();
  CHECK(o != NULL);
  CHECK_OK(baton_acquire_options_set_ttl(o, ttl_ms));
  CHECK_OK(baton_acquire_options_set_label(o, label));
  return o;
}

/* Versions, error codes and option setters: no store needed. */
static void test_values(void) {
  CHECK(baton_version() == BATON_VERSION_NUMBER);
  CHECK(strcmp(baton_version_string(), BATON_VERSION_STRING) == 0);
  CHECK(strcmp(baton_errc_name(BATON_ERRC_NOT_ACQUIRED), "not_acquired") == 0);
  CHECK(strcmp(baton_errc_name(BATON_ERRC_CANCELLED), "cancelled") == 0);
  CHECK(strcmp(baton_errc_name(BATON_ERRC_UNSUPPORTED), "unsupported") == 0);
  CHECK(strcmp(baton_errc_name(BATON_OK), "ok") == 0);
  CHECK(strcmp(baton_errc_name((baton_errc_t)42), "unknown") == 0);
  CHECK(baton_errc_retryable(BATON_ERRC_UNAVAILABLE));
  CHECK(!baton_errc_retryable(BATON_ERRC_INVALID_ARGUMENT));
  CHECK(baton_error_code(NULL) == BATON_OK);
  CHECK(strcmp(baton_error_message(NULL), "") == 0);
  CHECK(baton_error_retry_after_ms(NULL) == 0);

  int64_t ms = -1;
  CHECK_OK(baton_parse_duration("1m30s", &ms));
  CHECK(ms == 90000);
  CHECK_OK(baton_parse_duration("0", &ms));
  CHECK(ms == 0);
  CHECK_ERR(baton_parse_duration("10", &ms), BATON_ERRC_INVALID_ARGUMENT);
  /* No store said when to retry: 0 (only an unavailable error of a store
   * that knows, redlock:// under its restart_guard, carries a time). */
  baton_error_t* plain = baton_parse_duration("10", &ms);
  CHECK(plain != NULL && baton_error_retry_after_ms(plain) == 0);
  baton_error_destroy(plain);
  CHECK_ERR(baton_parse_duration("-1s", &ms), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_parse_duration(NULL, &ms), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_parse_duration("1s", NULL), BATON_ERRC_INVALID_ARGUMENT);

  char token[33];
  CHECK_OK(baton_token_random(token));
  CHECK(strlen(token) == 32 && strspn(token, "0123456789abcdef") == 32);
  CHECK_ERR(baton_token_random(NULL), BATON_ERRC_INVALID_ARGUMENT);

  baton_client_options_t* co = baton_client_options_new();
  CHECK_ERR(baton_client_options_set_request_timeout(co, 0),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_options_set_retry_interval(co, -1),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_options_set_max_retries(co, -1),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_options_set_drift(co, 0.5, 2),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_options_set_drift(co, 0.01, -2),
            BATON_ERRC_INVALID_ARGUMENT);
  char long_label[300];
  memset(long_label, 'x', sizeof long_label - 1);
  long_label[sizeof long_label - 1] = '\0';
  CHECK_ERR(baton_client_options_set_label(co, long_label),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_options_set_label(NULL, "x"),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_OK(baton_client_options_set_label(co, "values-client"));
  baton_client_t* client = NULL;
  CHECK_ERR(baton_client_open(NULL, co, &client), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_open("nosuch://x", co, &client),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK(client == NULL);
  CHECK_ERR(baton_client_open("memory:", co, NULL),
            BATON_ERRC_INVALID_ARGUMENT);
  /* The refused label above changed nothing: the client has the last
   * accepted one. */
  CHECK_OK(baton_client_open("memory:", co, &client));
  CHECK(strcmp(baton_client_label(client), "values-client") == 0);
  CHECK(strcmp(baton_client_url(client), "memory:") == 0);
  baton_client_options_destroy(co);

  /* A refused TTL leaves the last accepted one. */
  baton_acquire_options_t* o = options(4321, "values");
  CHECK_ERR(baton_acquire_options_set_ttl(o, 0), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_acquire_options_set_ttl(o, 8LL * 24 * 3600 * 1000),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_acquire_options_set_capacity(o, 0),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_acquire_options_set_token(o, "xyz"),
            BATON_ERRC_INVALID_ARGUMENT);
  baton_lease_t* lease = NULL;
  CHECK_OK(baton_client_try_acquire(client, "values", o, &lease));
  CHECK(baton_lease_ttl_ms(lease) == 4321);
  CHECK(baton_lease_capacity(lease) == 1);
  baton_lease_destroy(lease);
  baton_acquire_options_destroy(o);

  baton_keeper_options_t* ko = baton_keeper_options_new();
  CHECK_ERR(baton_keeper_options_set_renew_interval(ko, -1),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_keeper_options_set_lost_fd(ko, 1000000),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_keeper_options_set_lost_fd(ko, -7),
            BATON_ERRC_INVALID_ARGUMENT);
  baton_keeper_options_destroy(ko);
  baton_elector_options_t* eo = baton_elector_options_new();
  CHECK_ERR(baton_elector_options_set_ttl(eo, 0), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_elector_options_set_retry_interval(eo, -1),
            BATON_ERRC_INVALID_ARGUMENT);
  baton_elector_options_destroy(eo);
  /* _destroy accepts NULL. */
  baton_client_options_destroy(NULL);
  baton_acquire_options_destroy(NULL);
  baton_error_destroy(NULL);
  baton_lease_destroy(NULL);
  baton_client_destroy(client);
}

void test_acquire_release(baton_client_t* c) {
  const char* name = name_of("lock");
  baton_acquire_options_t* alpha = options(20000, "alpha");
  baton_acquire_options_t* beta = options(20000, "beta");

  /* Bad input: invalid_argument, and nothing reaches the store. */
  baton_lease_t* lease = NULL;
  CHECK_ERR(baton_client_try_acquire(c, "", alpha, &lease),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_try_acquire(c, NULL, alpha, &lease),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_try_acquire(NULL, name, alpha, &lease),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_try_acquire(c, name, alpha, NULL),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_acquire(c, name, -1, alpha, NULL, &lease),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_acquire(c, name, 8LL * 24 * 3600 * 1000, alpha, NULL,
                                 &lease),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK(lease == NULL);
  CHECK(holders_of(c, name) == 0 && waiters_of(c, name) == 0);

  CHECK_OK(baton_client_try_acquire(c, name, alpha, &lease));
  CHECK(strcmp(baton_lease_name(lease), name) == 0);
  CHECK(strlen(baton_lease_token(lease)) == 32);
  const uint64_t fencing = baton_lease_fencing_token(lease);
  CHECK(fencing > 0);
  CHECK(baton_lease_ttl_ms(lease) == 20000);
  CHECK(baton_lease_holds(lease) == 1 && !baton_lease_shared(lease));
  CHECK(baton_lease_time_left_ms(lease) > 10000);
  CHECK(baton_lease_time_left_ms(lease) <= 20000);
  CHECK(baton_lease_local_deadline_ns(lease) > now_ns());
  CHECK(baton_lease_store_expires_at_ms(lease) > 0);

  /* not_acquired names the holder. */
  baton_lease_t* other = NULL;
  baton_error_t* err = baton_client_try_acquire(c, name, beta, &other);
  CHECK(baton_error_code(err) == BATON_ERRC_NOT_ACQUIRED && other == NULL);
  CHECK(baton_error_message(err)[0] != '\0');
  const baton_holders_t* h = baton_error_holders(err);
  CHECK(baton_holders_count(h) == 1);
  CHECK(strcmp(baton_holders_label(h, 0), "alpha") == 0);
  CHECK(baton_holders_fencing_token(h, 0) == fencing);
  CHECK(baton_holders_time_left_ms(h, 0) > 0);
  CHECK(baton_holders_holds(h, 0) == 1 && !baton_holders_shared(h, 0));
  CHECK(baton_holders_label(h, 1) == NULL);
  baton_error_destroy(err);
  /* A wait ends with timeout and leaves no trace. */
  const int64_t t0 = now_ms();
  CHECK_ERR(baton_client_acquire(c, name, 100, beta, NULL, &other),
            BATON_ERRC_TIMEOUT);
  CHECK(now_ms() - t0 >= 90);
  CHECK(waiters_of(c, name) == 0);

  baton_lock_info_t* info = NULL;
  CHECK_OK(baton_client_describe(c, name, &info));
  CHECK(strcmp(baton_lock_info_name(info), name) == 0);
  CHECK(baton_lock_info_capacity(info) == 1 && !baton_lock_info_is_free(info));
  CHECK(baton_lock_info_last_fencing_token(info) >= fencing);
  CHECK(baton_holders_count(baton_lock_info_holders(info)) == 1);
  CHECK(strcmp(baton_holders_label(baton_lock_info_holders(info), 0),
               "alpha") == 0);
  baton_lock_info_destroy(info);

  /* Extend-to: a new lease object, same fencing token. */
  baton_lease_t* renewed = NULL;
  CHECK_ERR(baton_client_extend(c, lease, -5, &renewed),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_OK(baton_client_extend(c, lease, 60000, &renewed));
  CHECK(baton_lease_ttl_ms(renewed) == 60000);
  CHECK(baton_lease_fencing_token(renewed) == fencing);
  CHECK(baton_lease_time_left_ms(renewed) > 30000);
  CHECK(baton_lease_ttl_ms(lease) == 20000); /* unchanged */
  baton_lease_t* again = NULL;
  CHECK_OK(baton_client_extend(c, renewed, 0, &again)); /* its own TTL */
  CHECK(baton_lease_ttl_ms(again) == 60000);
  baton_lease_destroy(again);

  int released = -1;
  CHECK_OK(baton_client_release(c, renewed, &released));
  CHECK(released == 1);
  CHECK_OK(baton_client_release(c, lease, &released));
  CHECK(released == 0); /* idempotent */
  CHECK_OK(baton_client_release(c, lease, NULL));
  CHECK_ERR(baton_client_extend(c, lease, 1000, &again), BATON_ERRC_LOCK_LOST);
  CHECK_ERR(baton_client_release(c, NULL, &released),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK(holders_of(c, name) == 0);
  CHECK_ERR(baton_client_describe(c, "", &info), BATON_ERRC_INVALID_ARGUMENT);
  baton_lease_destroy(renewed);
  baton_lease_destroy(lease);
  baton_acquire_options_destroy(alpha);
  baton_acquire_options_destroy(beta);
}

void test_tokens_and_reentrancy(baton_client_t* c) {
  const char* name = name_of("token");
  char token[33];
  CHECK_OK(baton_token_random(token));
  baton_acquire_options_t* o = options(20000, "tok");
  CHECK_OK(baton_acquire_options_set_token(o, token));
  baton_lease_t *a = NULL, *b = NULL;
  CHECK_OK(baton_client_try_acquire(c, name, o, &a));
  CHECK(strcmp(baton_lease_token(a), token) == 0);
  /* The same request again (rule 17): the same grant. */
  CHECK_OK(baton_client_try_acquire(c, name, o, &b));
  CHECK(baton_lease_fencing_token(b) == baton_lease_fencing_token(a));
  CHECK(holders_of(c, name) == 1);
  baton_lease_destroy(b);

  /* A lease known by name and token releases it (from "elsewhere"). */
  baton_lease_t* by_token = NULL;
  CHECK_ERR(baton_lease_new(name, "not-hex", 1000, &by_token),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_lease_new("", token, 1000, &by_token),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_lease_new(name, token, 0, &by_token),
            BATON_ERRC_INVALID_ARGUMENT);
  char stranger[33];
  CHECK_OK(baton_token_random(stranger));
  CHECK_OK(baton_lease_new(name, stranger, 1000, &by_token));
  int released = -1;
  CHECK_OK(baton_client_release(c, by_token, &released));
  CHECK(released == 0 && holders_of(c, name) == 1); /* not another's */
  baton_lease_destroy(by_token);
  CHECK_OK(baton_lease_new(name, token, 1000, &by_token));
  CHECK(baton_lease_fencing_token(by_token) == 0);
  CHECK_OK(baton_client_release(c, by_token, &released));
  CHECK(released == 1 && holders_of(c, name) == 0);
  baton_lease_destroy(by_token);
  baton_lease_destroy(a);

  /* Reentrancy: one lease, two holds. */
  CHECK_OK(baton_acquire_options_set_token(o, NULL));
  CHECK_OK(baton_acquire_options_set_reentrancy_key(o, "job-7"));
  CHECK_OK(baton_client_try_acquire(c, name, o, &a));
  CHECK_OK(baton_client_try_acquire(c, name, o, &b));
  CHECK(baton_lease_holds(b) == 2);
  CHECK(baton_lease_fencing_token(b) == baton_lease_fencing_token(a));
  CHECK_OK(baton_client_release(c, b, &released));
  CHECK(released == 1 && holders_of(c, name) == 1);
  CHECK_OK(baton_client_release(c, a, &released));
  CHECK(holders_of(c, name) == 0);
  baton_lease_t* copy = baton_lease_copy(a);
  CHECK(copy != a &&
        strcmp(baton_lease_token(copy), baton_lease_token(a)) == 0);
  baton_lease_destroy(copy);
  baton_lease_destroy(a);
  baton_lease_destroy(b);
  baton_acquire_options_destroy(o);
}

void test_shared_and_semaphore(baton_client_t* c) {
  const char* name = name_of("rw");
  baton_acquire_options_t* o = options(20000, "reader");
  baton_lease_t *r1 = NULL, *r2 = NULL, *w = NULL;
  CHECK_OK(baton_client_acquire_shared(c, name, 0, o, NULL, &r1));
  CHECK_OK(baton_client_acquire_shared(c, name, 1000, o, NULL, &r2));
  CHECK(baton_lease_shared(r1) && baton_lease_shared(r2));
  baton_error_t* err = baton_client_try_acquire(c, name, o, &w);
  CHECK(baton_error_code(err) == BATON_ERRC_NOT_ACQUIRED);
  const baton_holders_t* h = baton_error_holders(err);
  CHECK(baton_holders_count(h) == 2);
  CHECK(baton_holders_shared(h, 0) && baton_holders_shared(h, 1));
  baton_error_destroy(err);
  CHECK_OK(baton_acquire_options_set_capacity(o, 2));
  CHECK_OK(baton_client_release(c, r1, NULL));
  CHECK_OK(baton_client_release(c, r2, NULL));
  baton_lease_destroy(r1);
  baton_lease_destroy(r2);

  /* Shared mode needs capacity 1: refused, nothing held. */
  CHECK_ERR(baton_client_acquire_shared(c, name, 0, o, NULL, &r1),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK(holders_of(c, name) == 0);
  /* A semaphore of 2. */
  const char* sem = name_of("sem");
  CHECK_OK(baton_client_try_acquire(c, sem, o, &r1));
  CHECK_OK(baton_client_try_acquire(c, sem, o, &r2));
  CHECK(baton_lease_capacity(r2) == 2);
  CHECK_ERR(baton_client_try_acquire(c, sem, o, &w), BATON_ERRC_NOT_ACQUIRED);
  CHECK_OK(baton_client_release(c, r1, NULL));
  CHECK_OK(baton_client_try_acquire(c, sem, o, &w));
  CHECK_OK(baton_client_release(c, r2, NULL));
  CHECK_OK(baton_client_release(c, w, NULL));
  baton_lease_destroy(r1);
  baton_lease_destroy(r2);
  baton_lease_destroy(w);
  baton_acquire_options_destroy(o);
}

void test_list(baton_client_t* c) {
  baton_acquire_options_t* o = options(20000, "lister");
  const char* names[3] = {name_of("list/a"), name_of("list/b"),
                          name_of("list/c")};
  baton_lease_t* held[3];
  for (int i = 0; i < 3; ++i) {
    CHECK_OK(baton_client_try_acquire(c, names[i], o, &held[i]));
  }
  baton_lock_list_t* list = NULL;
  CHECK_OK(baton_client_list(c, name_of("list/"), 10, &list));
  CHECK(baton_lock_list_count(list) == 3);
  for (size_t i = 0; i < 3; ++i) {
    const baton_lock_info_t* info = baton_lock_list_get(list, i);
    CHECK(strcmp(baton_lock_info_name(info), names[i]) == 0);
    CHECK(baton_holders_count(baton_lock_info_holders(info)) == 1);
  }
  CHECK(baton_lock_list_get(list, 3) == NULL);
  baton_lock_list_destroy(list);
  CHECK_OK(baton_client_list(c, name_of("list/"), 2, &list));
  CHECK(baton_lock_list_count(list) == 2);
  baton_lock_list_destroy(list);
  CHECK_ERR(baton_client_list(c, name_of("list/"), 0, &list),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK(list == NULL);
  CHECK_OK(baton_client_list(c, NULL, 1000, &list)); /* every lock */
  CHECK(baton_lock_list_count(list) >= 3);
  baton_lock_list_destroy(list);
  for (int i = 0; i < 3; ++i) {
    CHECK_OK(baton_client_release(c, held[i], NULL));
    baton_lease_destroy(held[i]);
  }
  baton_acquire_options_destroy(o);
}

void test_multi(baton_client_t* c) {
  baton_acquire_options_t* o = options(20000, "multi");
  const char* names[3] = {name_of("multi/a"), name_of("multi/b"),
                          name_of("multi/c")};
  baton_lease_t* blocker = NULL;
  CHECK_OK(baton_client_try_acquire(c, names[1], o, &blocker));

  /* Bad input changes nothing. */
  baton_lease_list_t* got = NULL;
  const char* dup[2] = {names[0], names[0]};
  const char* with_null[2] = {names[0], NULL};
  char reservation[33];
  CHECK_OK(baton_token_random(reservation));
  CHECK_ERR(baton_client_acquire_all(c, dup, 2, 0, o, NULL, &got),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_acquire_all(c, with_null, 2, 0, o, NULL, &got),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_acquire_all(c, NULL, 2, 0, o, NULL, &got),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_acquire_all(c, names, 0, 0, o, NULL, &got),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_acquire_some(c, names, 3, "zz", 0, o, NULL, &got),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_client_acquire_some(c, names, 3, NULL, 0, o, NULL, &got),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK(got == NULL && holders_of(c, names[0]) == 0);

  /* All-or-nothing with one name held: timeout, no trace. */
  CHECK_ERR(baton_client_acquire_all(c, names, 3, 50, o, NULL, &got),
            BATON_ERRC_TIMEOUT);
  for (int i = 0; i < 3; ++i) {
    CHECK(holders_of(c, names[i]) == (i == 1 ? 1u : 0u));
    CHECK(waiters_of(c, names[i]) == 0);
  }

  /* Partial grant: a and c now, b queued under the reservation. */
  CHECK_OK(
      baton_client_acquire_some(c, names, 3, reservation, 100, o, NULL, &got));
  CHECK(baton_lease_list_count(got) == 2);
  CHECK(strcmp(baton_lease_name(baton_lease_list_get(got, 0)), names[0]) == 0);
  CHECK(strcmp(baton_lease_name(baton_lease_list_get(got, 1)), names[2]) == 0);
  CHECK(baton_lease_list_get(got, 2) == NULL);
  CHECK(waiters_of(c, names[1]) == 1);
  CHECK_OK(baton_client_release(c, blocker, NULL));
  baton_lease_list_t* rest = NULL;
  CHECK_OK(baton_client_acquire_some(c, names, 3, reservation, 1000, o, NULL,
                                     &rest));
  int has_b = 0;
  for (size_t i = 0; i < baton_lease_list_count(rest); ++i) {
    has_b |=
        strcmp(baton_lease_name(baton_lease_list_get(rest, i)), names[1]) == 0;
  }
  CHECK(has_b);
  for (size_t i = 0; i < baton_lease_list_count(rest); ++i) {
    CHECK_OK(baton_client_release(c, baton_lease_list_get(rest, i), NULL));
  }
  for (size_t i = 0; i < baton_lease_list_count(got); ++i) {
    CHECK_OK(baton_client_release(c, baton_lease_list_get(got, i), NULL));
  }
  baton_lease_list_destroy(rest);
  baton_lease_list_destroy(got);

  /* All at once when free. */
  CHECK_OK(baton_client_acquire_all(c, names, 3, 1000, o, NULL, &got));
  CHECK(baton_lease_list_count(got) == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK_OK(baton_client_release(c, baton_lease_list_get(got, i), NULL));
  }
  for (int i = 0; i < 3; ++i) CHECK(holders_of(c, names[i]) == 0);
  baton_lease_list_destroy(got);
  baton_lease_destroy(blocker);
  baton_acquire_options_destroy(o);
}

void test_counters(baton_client_t* c) {
  baton_counter_t* k = NULL;
  CHECK_ERR(baton_counter_new(c, "", &k), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_counter_new(c, NULL, &k), BATON_ERRC_INVALID_ARGUMENT);
  CHECK(k == NULL);
  CHECK_OK(baton_counter_new(c, name_of("prizes"), &k));
  CHECK(strcmp(baton_counter_name(k), name_of("prizes")) == 0);
  int64_t v = -1;
  CHECK_OK(baton_counter_get(k, &v));
  CHECK(v == 0);
  CHECK_ERR(baton_counter_get(k, NULL), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_OK(baton_counter_add(k, 3, &v));
  CHECK(v == 3);
  CHECK_OK(baton_counter_take(k, 2, &v));
  CHECK(v == 1);
  /* Never below zero: refused, unchanged. */
  CHECK_ERR(baton_counter_take(k, 2, &v), BATON_ERRC_NOT_ACQUIRED);
  CHECK_ERR(baton_counter_take(k, 0, &v), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_counter_add(k, INT64_MAX, &v), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_OK(baton_counter_get(k, &v));
  CHECK(v == 1);
  CHECK_OK(baton_counter_take(k, 1, NULL));
  CHECK_OK(baton_counter_add(k, -1, &v)); /* add may go below zero */
  CHECK(v == -1);
  CHECK_ERR(baton_counter_take(k, 1, &v), BATON_ERRC_NOT_ACQUIRED);
  baton_counter_destroy(k);
}

/* One suite per store. */
static void run_suite(const char* url, const char* tag) {
  g_url = url;
  g_tag = tag;
  const int64_t t0 = now_ms();
  baton_client_options_t* co = baton_client_options_new();
  CHECK_OK(baton_client_options_set_label(co, "capi-test"));
  CHECK_OK(baton_client_options_set_request_timeout(co, 2000));
  baton_client_t* c = NULL;
  CHECK_OK(baton_client_open(url, co, &c));
  baton_client_options_destroy(co);
  test_acquire_release(c);
  test_tokens_and_reentrancy(c);
  test_shared_and_semaphore(c);
  test_list(c);
  test_multi(c);
  test_counters(c);
  test_cancel(c);
  test_keeper(c);
  test_session(c);
  test_lost_at_deadline(c);
  test_elector(c);
  test_fork(c);
  baton_client_destroy(c);
  printf("capi_test: %s passed (%lld ms)\n", url, (long long)(now_ms() - t0));
  fflush(stdout);
}

#ifdef BATOND_PATH
/* A store that does not answer: unavailable, retryable, within the
 * request timeout. */
static void test_unavailable(const char* url) {
  g_url = url;
  baton_client_options_t* co = baton_client_options_new();
  CHECK_OK(baton_client_options_set_request_timeout(co, 300));
  CHECK_OK(baton_client_options_set_max_retries(co, 0));
  baton_client_t* c = NULL;
  baton_error_t* err = baton_client_open(url, co, &c);
  baton_client_options_destroy(co);
  if (!err) {
    baton_lease_t* lease = NULL;
    const int64_t t0 = now_ms();
    err = baton_client_try_acquire(c, "capi/unavailable", NULL, &lease);
    CHECK(now_ms() - t0 < 5000);
    baton_client_destroy(c);
  }
  CHECK(baton_error_code(err) == BATON_ERRC_UNAVAILABLE);
  CHECK(baton_error_retryable(err));
  CHECK(baton_error_retry_after_ms(err) == 0); /* refused: no time known */
  baton_error_destroy(err);
}
#endif

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_values();
  run_suite("memory:capi", "mem");
#ifdef BATOND_PATH
  /* Nothing listens on port 1 of the loopback: connections are refused. */
  test_unavailable("baton://127.0.0.1:1");
  char url[64];
  g_batond_pid = batond_start(BATOND_PATH, url, sizeof url);
  g_url = BATOND_PATH;
  CHECK(g_batond_pid > 0);
  run_suite(url, "batond");
  batond_stop();
  g_batond_pid = 0;
#else
  printf("capi_test: baton:// not tested (built without batond)\n");
#endif
  printf("capi_test: all passed\n");
  return 0;
}
