// cli/guard.h — the guard process between baton and the command of
// `baton run` / `baton elect` (used by child.cc; see child.h for the whole
// design).
//
//   baton ── guard ── command (its own process group) ── grandchildren
//
// guard_main() runs in a process forked (not exec'd) from baton, which has
// threads: it makes only async-signal-safe calls and never allocates. It
// arms PR_SET_PDEATHSIG (a catchable signal) and checks that baton is still
// its parent, forks the command into a new process group (the command
// takes the terminal if asked, arms PR_SET_PDEATHSIG = SIGKILL against a
// dying guard, resets signal dispositions and execs; an exec error comes
// back through a CLOEXEC pipe), reports the command's pid and exec errno,
// then its wait status, and SIGKILLs the group when baton dies or the
// command exits (what it left behind).
//
// Thread safety: guard_main() never returns; the rest are plain functions.
#ifndef BATON_CLI_GUARD_H_
#define BATON_CLI_GUARD_H_

#include <signal.h>
#include <sys/types.h>

#include <array>

namespace baton::cli {

// The signals baton forwards to the command's group (the guard ignores
// them).
inline constexpr std::array<int, 4> kForwardedSignals = {SIGINT, SIGTERM,
                                                         SIGHUP, SIGQUIT};

// fork(2) without the atfork handlers: the guard and the command are
// forked from a multithreaded process and only make raw system calls.
pid_t raw_fork();

// Guard -> baton messages on the report pipe (one write each, < PIPE_BUF:
// atomic).
enum MessageKind : int {
  kStarted = 1,  // a = command pid (= its process group), b = exec errno
  kExited = 2,   // a = the command's wait status
};
struct Message {
  int kind = 0;
  int a = 0;
  int b = 0;
};

// 1: a message, 0: end of file (the guard is gone), -1: error.
int read_message(int fd, Message* m);

// Everything the guard and the command need, prepared before the fork:
// after it, only async-signal-safe calls are made (no allocation).
struct SpawnPlan {
  const char* path = nullptr;  // resolved argv[0]
  char* const* argv = nullptr;
  char* const* sh_argv = nullptr;  // "/bin/sh path args..." for ENOEXEC
  char* const* envp = nullptr;
  pid_t baton_pid = 0;
  int report_fd = -1;  // write end of the guard -> baton pipe
  int tty_fd = -1;     // >= 0: hand the terminal to the command's group
  sigset_t empty;
};

// The guard; `plan` was filled before the fork.
[[noreturn]] void guard_main(const SpawnPlan& plan);

}  // namespace baton::cli

#endif  // BATON_CLI_GUARD_H_
