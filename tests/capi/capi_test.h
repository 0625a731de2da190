/* tests/capi/capi_test.h — the C API test's own assertions and helpers
 * (plain C11 + POSIX; no test framework).
 *
 * A failed check prints where and why (with the error's code and message),
 * stops the test's batond and ends the process at once with status 1: the
 * checks that follow a failed one would only report its consequences. */
#ifndef BATON_TESTS_CAPI_CAPI_TEST_H_
#define BATON_TESTS_CAPI_CAPI_TEST_H_

#include <baton/baton.h>
#include <stdint.h>

/* The store of the suite that runs ("memory:capi", "baton://..."), for
 * messages, and whether it is a batond this test started (and may
 * SIGSTOP). */
extern const char* g_url;
extern int g_batond_pid;

void capi_fail(const char* file, int line, const char* what,
               const baton_error_t* err);
void capi_expect(const char* file, int line, const char* what,
                 baton_error_t* err, baton_errc_t want);

#define CHECK(cond)                                          \
  do {                                                       \
    if (!(cond)) capi_fail(__FILE__, __LINE__, #cond, NULL); \
  } while (0)
/* The call succeeds. */
#define CHECK_OK(call)                                          \
  do {                                                          \
    baton_error_t* capi_e_ = (call);                            \
    if (capi_e_) capi_fail(__FILE__, __LINE__, #call, capi_e_); \
  } while (0)
/* The call fails with `code` (the error is freed). */
#define CHECK_ERR(call, code) \
  capi_expect(__FILE__, __LINE__, #call, (call), (code))

int64_t now_ms(void);
int64_t now_ns(void);
void sleep_ms(int64_t ms);
/* "capi/<store tag>/<what>": names unique per suite. */
const char* name_of(const char* what);
/* Polls `cond(arg)` every 5 ms for at most `ms`; returns its last answer. */
int eventually(int (*cond)(void* arg), void* arg, int64_t ms);
/* Waiters on `name` now, per describe. */
size_t waiters_of(baton_client_t* c, const char* name);
size_t holders_of(baton_client_t* c, const char* name);

/* The suites (capi_test.c, capi_wait_test.c). */
void test_acquire_release(baton_client_t* c);
void test_tokens_and_reentrancy(baton_client_t* c);
void test_shared_and_semaphore(baton_client_t* c);
void test_list(baton_client_t* c);
void test_multi(baton_client_t* c);
void test_counters(baton_client_t* c);
void test_cancel(baton_client_t* c);
void test_keeper(baton_client_t* c);
void test_session(baton_client_t* c);
void test_lost_at_deadline(baton_client_t* c);
void test_elector(baton_client_t* c);
void test_fork(baton_client_t* c);

/* batond (capi_batond.c): starts one on a free loopback port in a fresh
 * temporary directory; returns its pid (0 if it did not start) and writes
 * its URL. batond_stop() does nothing but in the process that started it
 * (a failed check in a fork child leaves it to the parent). */
int batond_start(const char* path, char* url, size_t url_size);
void batond_stop(void);

#endif /* BATON_TESTS_CAPI_CAPI_TEST_H_ */
