// cli/guard.cc — the guard process and the command's start (guard.h).
// After fork: async-signal-safe calls only.
#include "cli/guard.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstring>

namespace baton::cli {

namespace {

// The guard's parent-death signal: catchable, so that the guard can kill
// the command's whole group before it goes.
constexpr int kDeathSignal = SIGUSR1;
// Dispositions the command gets back to default: baton forwards or ignores
// (SIGPIPE) these, the guard uses SIGUSR1 and SIGCHLD. (SIGTTOU too when
// the terminal is handed over.)
constexpr std::array<int, 7> kResetInCommand = {
    SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGCHLD};
// Exit status of a guard or command whose parent died before it could
// arm PR_SET_PDEATHSIG (nobody reads it).
constexpr int kOrphaned = 1;

void send_message(int fd, int kind, int a, int b) {
  Message m;
  m.kind = kind;
  m.a = a;
  m.b = b;
  while (write(fd, &m, sizeof m) < 0 && errno == EINTR) {
  }
}

void ignore_signal_handler(int) {}

void set_disposition(int sig, void (*handler)(int)) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}

[[noreturn]] void command_main(const SpawnPlan& plan, int exec_fd,
                               pid_t guard) {
  setpgid(0, 0);
  // SIGTTOU is ignored (inherited from baton), so a background group may
  // take the terminal.
  if (plan.tty_fd >= 0) {
    tcsetpgrp(plan.tty_fd, getpid());
    set_disposition(SIGTTOU, SIG_DFL);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != guard) _exit(kOrphaned);
  for (int sig : kResetInCommand) set_disposition(sig, SIG_DFL);
  sigprocmask(SIG_SETMASK, &plan.empty, nullptr);
  execve(plan.path, plan.argv, plan.envp);
  int err = errno;
  if (err == ENOEXEC) {
    // As execvp(3): a script without "#!" runs under /bin/sh.
    execve("/bin/sh", plan.sh_argv, plan.envp);
  }
  while (write(exec_fd, &err, sizeof err) < 0 && errno == EINTR) {
  }
  _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

// The guard: forks the command into its own process group, relays its
// status, and SIGKILLs the group when baton dies or the command exits.
}  // namespace

// fork(2) without the atfork handlers: the guard and the command are
// forked from a multithreaded process and only make raw system calls.
pid_t raw_fork() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
  return _Fork();
#else
  return fork();
#endif
}

int read_message(int fd, Message* m) {
  for (;;) {
    ssize_t n = read(fd, m, sizeof *m);
    if (n == static_cast<ssize_t>(sizeof *m)) return 1;
    if (n == 0) return 0;
    if (n < 0 && errno == EINTR) continue;
    return -1;
  }
}

[[noreturn]] void guard_main(const SpawnPlan& plan) {
  for (int sig : kForwardedSignals) set_disposition(sig, SIG_IGN);
  set_disposition(SIGCHLD, ignore_signal_handler);
  set_disposition(kDeathSignal, ignore_signal_handler);
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGCHLD);
  sigaddset(&block, kDeathSignal);
  sigprocmask(SIG_BLOCK, &block, nullptr);
  prctl(PR_SET_PDEATHSIG, kDeathSignal);
  // baton may have died before prctl: then nobody would ever signal us.
  if (getppid() != plan.baton_pid) _exit(kOrphaned);

  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    send_message(plan.report_fd, kStarted, 0, errno);
    _exit(126);
  }
  const pid_t self = getpid();
  const pid_t command = raw_fork();
  if (command == 0) {
    close(exec_pipe[0]);
    command_main(plan, exec_pipe[1], self);
  }
  if (command < 0) {
    send_message(plan.report_fd, kStarted, 0, errno);
    _exit(126);
  }
  setpgid(command, command);  // as the command does: whichever runs first
  close(exec_pipe[1]);
  int exec_errno = 0;
  for (;;) {
    ssize_t n = read(exec_pipe[0], &exec_errno, sizeof exec_errno);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof exec_errno)) exec_errno = 0;
    break;
  }
  close(exec_pipe[0]);
  send_message(plan.report_fd, kStarted, command, exec_errno);

  int status = 0;
  for (;;) {
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    if (waitid(P_PID, command, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == command) {
      // Exited, not yet reaped: its pid still names the group, so this
      // reaches only what it left behind there.
      kill(-command, SIGKILL);
      while (waitpid(command, &status, 0) < 0 && errno == EINTR) {
      }
      send_message(plan.report_fd, kExited, status, 0);
      _exit(0);
    }
    if (getppid() != plan.baton_pid) {
      // baton is gone: nobody renews the lease any more.
      kill(-command, SIGKILL);
      while (waitpid(command, &status, 0) < 0 && errno == EINTR) {
      }
      _exit(kOrphaned);
    }
    sigsuspend(&plan.empty);
  }
}

}  // namespace baton::cli
