/* tests/capi/capi_wait_test.c — the C API's blocking side: cancellation
 * from another thread, keepers and sessions with their lost notice,
 * leader election with its callbacks, and the refusal after fork(). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capi_test.h"

/* ---- A blocking call on a thread of its own --------------------------- */

typedef struct {
  baton_client_t* client;
  baton_elector_t* elector; /* campaign instead of acquire if set */
  const char* name;
  int64_t wait_ms;
  baton_cancel_t* cancel;
  baton_errc_t code; /* the call's answer */
  pthread_t thread;
} call_t;

static void* call_main(void* arg) {
  call_t* call = arg;
  baton_error_t* err;
  if (call->elector) {
    err = baton_elector_campaign(call->elector, call->wait_ms, call->cancel);
  } else {
    baton_lease_t* lease = NULL;
    err = baton_client_acquire(call->client, call->name, call->wait_ms, NULL,
                               call->cancel, &lease);
    if (lease) {
      CHECK_OK(baton_client_release(call->client, lease, NULL));
      baton_lease_destroy(lease);
    }
  }
  call->code = baton_error_code(err);
  baton_error_destroy(err);
  return NULL;
}

static void call_start(call_t* call) {
  CHECK(pthread_create(&call->thread, NULL, call_main, call) == 0);
}
static void call_join(call_t* call) {
  CHECK(pthread_join(call->thread, NULL) == 0);
}

typedef struct {
  baton_client_t* client;
  const char* name;
  size_t want;
} queue_t;

static int queue_is(void* arg) {
  queue_t* q = arg;
  return waiters_of(q->client, q->name) == q->want;
}

/* Waits (bounded) until `name` has `n` waiters. */
static void await_waiters(baton_client_t* c, const char* name, size_t n) {
  queue_t q = {c, name, n};
  CHECK(eventually(queue_is, &q, 5000));
}

void test_cancel(baton_client_t* c) {
  const char* name = name_of("cancel");
  baton_lease_t* holder = NULL;
  CHECK_OK(baton_client_try_acquire(c, name, NULL, &holder));

  call_t call = {.client = c, .name = name, .wait_ms = 20000};
  call.cancel = baton_cancel_new();
  CHECK(call.cancel && !baton_cancel_requested(call.cancel));
  call_start(&call);
  await_waiters(c, name, 1);
  const int64_t t0 = now_ms();
  baton_cancel_request(call.cancel); /* from this thread, not the caller's */
  call_join(&call);
  CHECK(call.code == BATON_ERRC_CANCELLED);
  CHECK(now_ms() - t0 < 3000);
  CHECK(baton_cancel_requested(call.cancel));
  /* Nothing stays queued; the holder is untouched. */
  CHECK(waiters_of(c, name) == 0 && holders_of(c, name) == 1);

  /* Requested before the call: cancelled at once, nothing sent. */
  baton_lease_t* lease = NULL;
  CHECK_ERR(baton_client_acquire(c, name, 20000, NULL, call.cancel, &lease),
            BATON_ERRC_CANCELLED);
  const char* names[1] = {name};
  baton_lease_list_t* leases = NULL;
  CHECK_ERR(
      baton_client_acquire_all(c, names, 1, 20000, NULL, call.cancel, &leases),
      BATON_ERRC_CANCELLED);
  baton_keeper_t* k = NULL;
  CHECK_ERR(baton_keeper_acquire(c, name, 20000, NULL, NULL, call.cancel, &k),
            BATON_ERRC_CANCELLED);
  CHECK(waiters_of(c, name) == 0);
  baton_cancel_destroy(call.cancel);
  baton_cancel_destroy(NULL);

  CHECK_OK(baton_client_release(c, holder, NULL));
  baton_lease_destroy(holder);
}

/* ---- The lost notice --------------------------------------------------- */

typedef struct {
  atomic_int count;
  atomic_int code;
  atomic_llong at_ns;       /* when it came */
  atomic_llong deadline_ns; /* the keeper's safe deadline then */
  _Atomic(baton_keeper_t*) keeper;
} notice_t;

static void on_lost(const baton_error_t* why, void* user) {
  notice_t* n = user;
  atomic_store(&n->at_ns, now_ns());
  baton_keeper_t* k = atomic_load(&n->keeper);
  if (k) atomic_store(&n->deadline_ns, baton_keeper_safe_deadline_ns(k));
  atomic_store(&n->code, (int)baton_error_code(why));
  atomic_fetch_add(&n->count, 1);
}

static int keeper_lost(void* k) { return baton_keeper_lost(k); }

/* Keeper options with on_lost into `n` and the write end of a new
 * non-blocking pipe `fds`. */
static baton_keeper_options_t* notice_options(notice_t* n, int fds[2]) {
  CHECK(pipe(fds) == 0);
  CHECK(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
  CHECK(fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0);
  baton_keeper_options_t* ko = baton_keeper_options_new();
  CHECK_OK(baton_keeper_options_set_on_lost(ko, on_lost, n));
  CHECK_OK(baton_keeper_options_set_lost_fd(ko, fds[1]));
  return ko;
}

/* The 8-byte value 1 written to the pipe at the notice, once. */
static void check_fd_notified(int fd) {
  uint64_t v = 0;
  CHECK(read(fd, &v, sizeof v) == (ssize_t)sizeof v && v == 1);
  CHECK(read(fd, &v, sizeof v) == -1 && errno == EAGAIN);
}

void test_keeper(baton_client_t* c) {
  const char* name = name_of("kept");
  int fds[2];
  notice_t n = {0};
  baton_keeper_options_t* ko = notice_options(&n, fds);
  baton_acquire_options_t* o = baton_acquire_options_new();
  CHECK_OK(baton_acquire_options_set_ttl(o, 300));

  baton_keeper_t* k = NULL;
  CHECK_ERR(baton_keeper_acquire(c, name, -1, o, ko, NULL, &k),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_keeper_acquire(c, NULL, 0, o, ko, NULL, &k),
            BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_keeper_new(c, NULL, ko, &k), BATON_ERRC_INVALID_ARGUMENT);
  CHECK(k == NULL && holders_of(c, name) == 0);

  CHECK_OK(baton_keeper_acquire(c, name, 0, o, ko, NULL, &k));
  atomic_store(&n.keeper, k);
  const int64_t first_deadline = baton_keeper_safe_deadline_ns(k);
  CHECK(!baton_keeper_lost(k) && first_deadline > now_ns());
  sleep_ms(450); /* past the TTL: renewed meanwhile */
  CHECK(!baton_keeper_lost(k));
  CHECK(baton_keeper_safe_deadline_ns(k) > first_deadline);
  baton_lease_t* snap = NULL;
  CHECK_OK(baton_keeper_lease(k, &snap));
  CHECK(baton_lease_time_left_ms(snap) > 0 && holders_of(c, name) == 1);

  /* Freed under it (by its token): the next renewal answers lock_lost,
   * and the notice comes: flag, fd, then on_lost once. */
  int released = -1;
  CHECK_OK(baton_client_release(c, snap, &released));
  CHECK(released == 1);
  CHECK(eventually(keeper_lost, k, 3000));
  sleep_ms(20);
  CHECK(atomic_load(&n.count) == 1);
  CHECK(atomic_load(&n.code) == BATON_ERRC_LOCK_LOST);
  check_fd_notified(fds[0]);
  CHECK_OK(baton_keeper_release(k, &released));
  CHECK(released == 0); /* already lost: the store is not asked */
  baton_keeper_destroy(k);
  baton_lease_destroy(snap);

  /* Released by hand, or by destroy; shared; from a lease in hand. */
  CHECK_OK(baton_acquire_options_set_ttl(o, 5000));
  CHECK_OK(baton_keeper_acquire(c, name, 1000, o, NULL, NULL, &k));
  CHECK_OK(baton_keeper_release(k, &released));
  CHECK(released == 1 && baton_keeper_lost(k) && holders_of(c, name) == 0);
  baton_keeper_destroy(k);
  CHECK_OK(baton_keeper_acquire_shared(c, name, 0, o, NULL, NULL, &k));
  CHECK_OK(baton_keeper_lease(k, &snap));
  CHECK(baton_lease_shared(snap) && holders_of(c, name) == 1);
  baton_lease_destroy(snap);
  baton_keeper_destroy(k);
  CHECK(holders_of(c, name) == 0);
  CHECK_OK(baton_acquire_options_set_ttl(o, 300));
  baton_lease_t* lease = NULL;
  CHECK_OK(baton_client_try_acquire(c, name, o, &lease));
  CHECK_OK(baton_keeper_new(c, lease, NULL, &k));
  sleep_ms(450);
  CHECK(!baton_keeper_lost(k) && holders_of(c, name) == 1);
  baton_keeper_destroy(k);
  CHECK(holders_of(c, name) == 0);
  CHECK(atomic_load(&n.count) == 1);
  baton_lease_destroy(lease);
  baton_acquire_options_destroy(o);
  baton_keeper_options_destroy(ko);
  close(fds[0]);
  close(fds[1]);
}

void test_session(baton_client_t* c) {
  baton_session_t* s = NULL;
  CHECK_ERR(baton_session_new(NULL, &s), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_OK(baton_session_new(c, &s));
  baton_acquire_options_t* o = baton_acquire_options_new();
  CHECK_OK(baton_acquire_options_set_ttl(o, 300));
  const char* names[2] = {name_of("session/a"), name_of("session/b")};
  baton_keeper_t* kept[2];
  for (int i = 0; i < 2; ++i) {
    baton_lease_t* lease = NULL;
    CHECK_OK(baton_client_try_acquire(c, names[i], o, &lease));
    CHECK_OK(baton_session_keep(s, lease, NULL, &kept[i]));
    baton_lease_destroy(lease);
  }
  CHECK(baton_session_size(s) == 2);
  baton_keeper_t* none = NULL;
  CHECK_ERR(baton_session_keep(s, NULL, NULL, &none),
            BATON_ERRC_INVALID_ARGUMENT);
  sleep_ms(450); /* past the TTL: both renewed */
  CHECK(holders_of(c, names[0]) == 1 && holders_of(c, names[1]) == 1);
  CHECK(!baton_keeper_lost(kept[0]) && !baton_keeper_lost(kept[1]));
  /* The session releases what it keeps; its keepers outlive it. */
  baton_session_destroy(s);
  CHECK(holders_of(c, names[0]) == 0 && holders_of(c, names[1]) == 0);
  for (int i = 0; i < 2; ++i) {
    int released = -1;
    CHECK(baton_keeper_lost(kept[i]));
    CHECK_OK(baton_keeper_release(kept[i], &released));
    CHECK(released == 0);
    baton_keeper_destroy(kept[i]);
  }
  baton_acquire_options_destroy(o);
}

/* batond frozen (SIGSTOP): no renewal can succeed, and the notice comes at
 * the local safe deadline, not when the store answers. */
void test_lost_at_deadline(baton_client_t* c) {
  if (g_batond_pid <= 0) return; /* needs a store this test may freeze */
  int fds[2];
  notice_t n = {0};
  baton_keeper_options_t* ko = notice_options(&n, fds);
  baton_acquire_options_t* o = baton_acquire_options_new();
  CHECK_OK(baton_acquire_options_set_ttl(o, 600));
  baton_keeper_t* k = NULL;
  CHECK_OK(baton_keeper_acquire(c, name_of("frozen"), 0, o, ko, NULL, &k));
  atomic_store(&n.keeper, k);
  CHECK(kill(g_batond_pid, SIGSTOP) == 0);
  const int ok = eventually(keeper_lost, k, 3000);
  sleep_ms(20);
  CHECK(kill(g_batond_pid, SIGCONT) == 0);
  CHECK(ok && atomic_load(&n.count) == 1);
  CHECK(atomic_load(&n.code) == BATON_ERRC_LOCK_LOST);
  /* At the deadline: not before it, and not long after (a margin for a
   * loaded machine; the notice thread wakes at the deadline itself). */
  const long long late = atomic_load(&n.at_ns) - atomic_load(&n.deadline_ns);
  CHECK(atomic_load(&n.deadline_ns) > 0);
  CHECK(late >= 0 && late < 250 * 1000000LL);
  check_fd_notified(fds[0]);
  baton_keeper_destroy(k);
  baton_keeper_options_destroy(ko);
  baton_acquire_options_destroy(o);
  close(fds[0]);
  close(fds[1]);
}

/* ---- Leader election --------------------------------------------------- */

typedef struct {
  const char* group;
  atomic_int elected;
  atomic_int elected_right_lease; /* on_elected's lease named the group */
  atomic_int saw_a;               /* on_new_leader reported "cand-a" */
  atomic_int lost;                /* on_lost calls that returned */
  atomic_int lost_started;        /* ... that began */
  atomic_int slow;                /* on_lost takes 200 ms */
  atomic_int destroy_self;        /* on_lost destroys `self` */
  _Atomic(baton_elector_t*) self;
} candidate_t;

static void on_elected(const baton_lease_t* lease, void* user) {
  candidate_t* cand = user;
  if (strcmp(baton_lease_name(lease), cand->group) == 0) {
    atomic_fetch_add(&cand->elected_right_lease, 1);
  }
  atomic_fetch_add(&cand->elected, 1);
}
static void on_new_leader(const char* label, void* user) {
  if (strcmp(label, "cand-a") == 0)
    atomic_store(&((candidate_t*)user)->saw_a, 1);
}
static void on_term_lost(const baton_error_t* why, void* user) {
  candidate_t* cand = user;
  atomic_store(&cand->lost_started, 1);
  CHECK(baton_error_code(why) == BATON_ERRC_LOCK_LOST);
  if (atomic_load(&cand->slow)) sleep_ms(200);
  if (atomic_load(&cand->destroy_self)) {
    baton_elector_destroy(atomic_exchange(&cand->self, NULL));
  }
  atomic_fetch_add(&cand->lost, 1);
}

static baton_elector_t* candidate(baton_client_t* c, candidate_t* cand,
                                  const char* label) {
  baton_elector_options_t* eo = baton_elector_options_new();
  CHECK_OK(baton_elector_options_set_ttl(eo, 1000));
  CHECK_OK(baton_elector_options_set_retry_interval(eo, 50));
  CHECK_OK(baton_elector_options_set_label(eo, label));
  CHECK_OK(baton_elector_options_set_on_elected(eo, on_elected, cand));
  CHECK_OK(baton_elector_options_set_on_new_leader(eo, on_new_leader, cand));
  CHECK_OK(baton_elector_options_set_on_lost(eo, on_term_lost, cand));
  baton_elector_t* e = NULL;
  CHECK_OK(baton_elector_new(c, cand->group, eo, &e));
  atomic_store(&cand->self, e);
  baton_elector_options_destroy(eo);
  return e;
}

static int flag_set(void* flag) { return atomic_load((atomic_int*)flag) != 0; }
static int self_gone(void* cand) {
  return atomic_load(&((candidate_t*)cand)->self) == NULL;
}

/* Frees the current term's lease under `e`: its renewal answers lock_lost. */
static void free_term(baton_client_t* c, baton_elector_t* e) {
  baton_lease_t* term = NULL;
  CHECK_OK(baton_elector_lease(e, &term));
  CHECK_OK(baton_client_release(c, term, NULL));
  baton_lease_destroy(term);
}

void test_elector(baton_client_t* c) {
  const char* group = name_of("leader");
  baton_elector_t* e = NULL;
  CHECK_ERR(baton_elector_new(c, "", NULL, &e), BATON_ERRC_INVALID_ARGUMENT);
  CHECK_ERR(baton_elector_new(NULL, group, NULL, &e),
            BATON_ERRC_INVALID_ARGUMENT);
  candidate_t ca = {.group = group}, cb = {.group = group};
  baton_elector_t* a = candidate(c, &ca, "cand-a");
  baton_elector_t* b = candidate(c, &cb, "cand-b");
  baton_leader_t* leader = NULL;
  CHECK_ERR(baton_elector_observe(a, &leader), BATON_ERRC_NOT_ACQUIRED);
  CHECK_ERR(baton_elector_campaign(a, -1, NULL), BATON_ERRC_INVALID_ARGUMENT);

  CHECK_OK(baton_elector_campaign(a, 2000, NULL));
  CHECK(atomic_load(&ca.elected) == 1 && atomic_load(&ca.elected_right_lease));
  CHECK(baton_elector_is_leader(a) && !baton_elector_cancelled(a));
  CHECK(baton_elector_safe_deadline_ns(a) > now_ns());
  CHECK_OK(baton_elector_campaign(a, 0, NULL)); /* already leader */
  baton_lease_t* term_a = NULL;
  CHECK_OK(baton_elector_lease(a, &term_a));

  /* Hand-over: b waits, sees a, and wins when a resigns. */
  call_t camp = {.elector = b, .wait_ms = 10000};
  call_start(&camp);
  CHECK(eventually(flag_set, &cb.saw_a, 3000));
  CHECK_OK(baton_elector_observe(b, &leader));
  CHECK(strcmp(baton_leader_label(leader), "cand-a") == 0);
  CHECK(baton_leader_fencing_token(leader) ==
        baton_lease_fencing_token(term_a));
  CHECK(baton_leader_time_left_ms(leader) > 0);
  baton_leader_destroy(leader);
  CHECK_OK(baton_elector_resign(a));
  call_join(&camp);
  CHECK(camp.code == BATON_OK && atomic_load(&cb.elected) == 1);
  CHECK(!baton_elector_is_leader(a) && baton_elector_cancelled(a));
  CHECK(baton_elector_safe_deadline_ns(a) == 0);
  baton_lease_t* none = NULL;
  CHECK_ERR(baton_elector_lease(a, &none), BATON_ERRC_NOT_ACQUIRED);
  CHECK_OK(baton_elector_observe(a, &leader));
  CHECK(strcmp(baton_leader_label(leader), "cand-b") == 0);
  CHECK(baton_leader_fencing_token(leader) > baton_lease_fencing_token(term_a));
  baton_leader_destroy(leader);
  baton_lease_destroy(term_a);

  /* b's term freed under it: on_lost, cancelled. */
  free_term(c, b);
  CHECK(eventually(flag_set, &cb.lost, 3000));
  CHECK(baton_elector_cancelled(b) && !baton_elector_is_leader(b));

  /* A waiting campaign ends by cancel, or by resign, without a trace. */
  baton_lease_t* holder = NULL;
  CHECK_OK(baton_client_try_acquire(c, group, NULL, &holder));
  camp = (call_t){.elector = a, .wait_ms = 20000, .cancel = baton_cancel_new()};
  call_start(&camp);
  await_waiters(c, group, 1);
  baton_cancel_request(camp.cancel);
  call_join(&camp);
  CHECK(camp.code == BATON_ERRC_CANCELLED && waiters_of(c, group) == 0);
  baton_cancel_destroy(camp.cancel);
  camp = (call_t){.elector = b, .wait_ms = 20000};
  call_start(&camp);
  await_waiters(c, group, 1);
  CHECK_OK(baton_elector_resign(b));
  call_join(&camp);
  CHECK(camp.code == BATON_ERRC_NOT_ACQUIRED && waiters_of(c, group) == 0);
  CHECK_OK(baton_client_release(c, holder, NULL));
  baton_lease_destroy(holder);
  baton_elector_destroy(a);
  baton_elector_destroy(b);

  /* An elector destroyed by its own on_lost (as a garbage collector may
   * do): the destruction finishes on another thread. */
  candidate_t cc = {.group = group};
  baton_elector_t* self = candidate(c, &cc, "cand-c");
  CHECK_OK(baton_elector_campaign(self, 2000, NULL));
  atomic_store(&cc.destroy_self, 1);
  free_term(c, self);
  CHECK(eventually(flag_set, &cc.lost, 3000) && self_gone(&cc));

  /* A destroy from another thread waits for an on_lost that runs: after
   * it returns, no callback of the elector runs any more. */
  candidate_t cd = {.group = group};
  baton_elector_t* slow = candidate(c, &cd, "cand-d");
  CHECK_OK(baton_elector_campaign(slow, 2000, NULL));
  atomic_store(&cd.slow, 1);
  free_term(c, slow);
  CHECK(eventually(flag_set, &cd.lost_started, 3000));
  baton_elector_destroy(slow);
  CHECK(atomic_load(&cd.lost) == 1);
}

/* ---- fork() ------------------------------------------------------------ */

void test_fork(baton_client_t* c) {
  baton_keeper_t* k = NULL;
  CHECK_OK(baton_keeper_acquire(c, name_of("fork"), 0, NULL, NULL, NULL, &k));
  baton_counter_t* counter = NULL;
  CHECK_OK(baton_counter_new(c, name_of("fork-counter"), &counter));
  fflush(NULL);
  const pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    /* The child: every handle of the parent is refused, clearly. */
    baton_lease_t* lease = NULL;
    baton_error_t* err =
        baton_client_try_acquire(c, name_of("fork2"), NULL, &lease);
    CHECK(baton_error_code(err) == BATON_ERRC_INVALID_ARGUMENT);
    CHECK(strstr(baton_error_message(err), "after fork()") != NULL);
    baton_error_destroy(err);
    CHECK(baton_keeper_lost(k) && baton_keeper_safe_deadline_ns(k) == 0);
    CHECK_ERR(baton_keeper_release(k, NULL), BATON_ERRC_INVALID_ARGUMENT);
    CHECK_ERR(baton_counter_add(counter, 1, NULL), BATON_ERRC_INVALID_ARGUMENT);
    CHECK_ERR(baton_session_new(c, NULL), BATON_ERRC_INVALID_ARGUMENT);
    /* Destroying them here touches nothing of the parent's. */
    baton_keeper_destroy(k);
    baton_counter_destroy(counter);
    baton_client_destroy(c);
    /* A client of the child's own works (memory: is per process). */
    baton_client_t* mine = NULL;
    CHECK_OK(
        baton_client_open(g_batond_pid > 0 ? g_url : "memory:", NULL, &mine));
    CHECK_OK(baton_client_try_acquire(mine, name_of("fork2"), NULL, &lease));
    CHECK_OK(baton_client_release(mine, lease, NULL));
    baton_lease_destroy(lease);
    baton_client_destroy(mine);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* The parent's handles are untouched. */
  CHECK(!baton_keeper_lost(k));
  int64_t v = -1;
  CHECK_OK(baton_counter_add(counter, 1, &v));
  CHECK(v == 1);
  int released = -1;
  CHECK_OK(baton_keeper_release(k, &released));
  CHECK(released == 1);
  baton_keeper_destroy(k);
  baton_counter_destroy(counter);
}
