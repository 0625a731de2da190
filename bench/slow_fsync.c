// bench/slow_fsync.c — an LD_PRELOAD shim that sleeps SLOW_FSYNC_US
// microseconds (default 1000) before each fsync() and fdatasync(): a
// stand-in for a slower disk under a server's commit log, for benchmarks
// only (bench/zk_disk.sh). The real call still runs, so durability is the
// disk's own. Not linked into anything baton ships.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static void slow_down(void) {
  const char* e = getenv("SLOW_FSYNC_US");
  const long us = e != NULL ? atol(e) : 1000;
  if (us <= 0) return;
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

int fsync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  slow_down();
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  slow_down();
  return real(fd);
}
