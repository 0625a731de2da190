/* tests/support/clockshift.c — libbaton_clockshift.so: a server's wall
 * clock, stepped by a test (server_clock.h), for the torture harness's
 * server_clock_step fault.
 *
 * Preloaded (LD_PRELOAD) into redis-server or a ZooKeeper JVM with
 * BATON_CLOCKSHIFT_FILE naming a file of 8 bytes: a signed offset in
 * nanoseconds, read on every call through a shared read-only mapping, so
 * a test's write takes effect at once. The wall clock alone is moved —
 * clock_gettime() of CLOCK_REALTIME, CLOCK_REALTIME_COARSE and CLOCK_TAI,
 * gettimeofday() and time() — as an operator's `date -s` or an NTP step
 * would move it; CLOCK_MONOTONIC and CLOCK_BOOTTIME, which never step on a
 * real machine, are left alone.
 *
 * Why not libfaketime: redis-server (linked with jemalloc) recursed into
 * the library's clock_gettime while the library initialised, and a
 * ZooKeeper ensemble of three JVMs under it did not serve. This library
 * allocates nothing, takes no lock and reads no file after it is loaded:
 * a call is the real call plus one load. Until the real clock_gettime is
 * found (a malloc during the lookup may read the clock), the system call
 * is made directly.
 *
 * Not reached: programs that read the clock without libc (Go's runtime,
 * and so etcd, reads it through the vDSO itself). Test-only; never
 * installed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec*);

static const int64_t* offset_ns; /* the mapped file, or NULL: no shift */
static clock_gettime_fn real_clock_gettime;

__attribute__((constructor)) static void clockshift_init(void) {
  const char* path = getenv("BATON_CLOCKSHIFT_FILE");
  if (path != NULL) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      void* p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
      close(fd);
      if (p != MAP_FAILED) offset_ns = (const int64_t*)p;
    }
  }
  real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
}

static int read_clock(clockid_t id, struct timespec* ts) {
  if (real_clock_gettime != NULL) return real_clock_gettime(id, ts);
  return (int)syscall(SYS_clock_gettime, id, ts);
}

static int64_t current_offset(void) {
  return offset_ns == NULL ? 0 : __atomic_load_n(offset_ns, __ATOMIC_RELAXED);
}

static void shift(struct timespec* ts, int64_t by) {
  if (by == 0) return;
  int64_t ns = (int64_t)ts->tv_nsec + by % 1000000000;
  int64_t s = (int64_t)ts->tv_sec + by / 1000000000;
  if (ns < 0) {
    ns += 1000000000;
    --s;
  } else if (ns >= 1000000000) {
    ns -= 1000000000;
    ++s;
  }
  ts->tv_sec = (time_t)s;
  ts->tv_nsec = (long)ns;
}

static int is_wall(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

int clock_gettime(clockid_t id, struct timespec* ts) {
  const int rc = read_clock(id, ts);
  if (rc == 0 && is_wall(id)) shift(ts, current_offset());
  return rc;
}

int gettimeofday(struct timeval* tv, void* tz) {
  struct timespec ts;
  if (read_clock(CLOCK_REALTIME, &ts) != 0) return -1;
  shift(&ts, current_offset());
  tv->tv_sec = ts.tv_sec; /* declared nonnull by glibc */
  tv->tv_usec = ts.tv_nsec / 1000;
  if (tz != NULL) {
    struct timezone* z = (struct timezone*)tz;
    z->tz_minuteswest = 0;
    z->tz_dsttime = 0;
  }
  return 0;
}

time_t time(time_t* out) {
  struct timespec ts;
  if (read_clock(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  shift(&ts, current_offset());
  if (out != NULL) *out = ts.tv_sec;
  return ts.tv_sec;
}
