/* tests/capi/capi_batond.c — a private batond for the C API test: started
 * with posix_spawn on a free loopback port (--listen 127.0.0.1:0) in a
 * fresh temporary directory; its ready line names the port. Stopped with
 * SIGTERM by pid, also when a check fails; its directory is removed. */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700 /* nftw */

#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capi_test.h"

extern char** environ;

static pid_t g_pid = 0;
static pid_t g_owner = 0; /* the process that started it (not a fork child) */
static char g_dir[64];

/* Reads batond's stdout until its ready line (at most 20 s); returns the
 * port it names, or 0. */
static int read_port(int fd) {
  char line[512];
  size_t len = 0;
  const int64_t end = now_ms() + 20000;
  while (now_ms() < end) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char ch;
    if (read(fd, &ch, 1) != 1) return 0; /* batond exited */
    if (ch != '\n') {
      if (len + 1 < sizeof line) line[len++] = ch;
      continue;
    }
    line[len] = '\0';
    len = 0;
    const char* at = strstr(line, "batond ready port=");
    if (at) return atoi(at + strlen("batond ready port="));
  }
  return 0;
}

int batond_start(const char* path, char* url, size_t url_size) {
  strcpy(g_dir, "/tmp/capi-batond-XXXXXX");
  if (!mkdtemp(g_dir)) return 0;
  char data[96], log[96];
  snprintf(data, sizeof data, "%s/data", g_dir);
  snprintf(log, sizeof log, "%s/batond.log", g_dir);
  int out[2];
  if (pipe(out) != 0) return 0;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, out[1]);
  posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT, 0600);
  char* argv[] = {(char*)path, "--listen",    "127.0.0.1:0", "--data-dir",
                  data,        "--log-level", "warn",        NULL};
  g_owner = getpid();
  const int rc = posix_spawn(&g_pid, path, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    g_pid = 0;
    return 0;
  }
  const int port = read_port(out[0]);
  /* batond ignores SIGPIPE: its later log lines may go nowhere. */
  close(out[0]);
  if (port <= 0) {
    batond_stop();
    return 0;
  }
  snprintf(url, url_size, "baton://127.0.0.1:%d", port);
  return (int)g_pid;
}

static int remove_entry(const char* path, const struct stat* st, int flag,
                        struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void batond_stop(void) {
  if (g_owner != getpid()) return; /* a fork child: the parent's batond */
  if (g_pid > 0) {
    kill(g_pid, SIGCONT); /* in case a test left it stopped */
    kill(g_pid, SIGTERM);
    int status;
    waitpid(g_pid, &status, 0);
    g_pid = 0;
  }
  if (g_dir[0]) nftw(g_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  g_dir[0] = '\0';
}
