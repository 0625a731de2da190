// cli/guard.h — the guard process between baton and the command of
// `baton run` / `baton elect` (used by child.cc; see child.h for the whole
// design).
//
//   baton ── guard (own process group) ── command (own process group) ── ...
//
// The guard is the one process that signals the command's process group,
// and the one that enforces the lease's deadline: baton hands it every new
// local safe deadline over the control pipe, and the guard sends SIGTERM
// `grace` before it and SIGKILL 10 ms before it by itself — whether baton
// runs, is stopped, starved or dead. Being the command's parent, it is the
// only process for which the command's pid (= its process group id) cannot
// name another process before it is reaped; baton never signals the
// command.
//
// guard_main() runs in a process forked (not exec'd) from baton, which has
// threads: it makes only async-signal-safe calls (raw system calls) and
// never allocates. It moves into a process group of its own (stopping
// baton's group, e.g. Ctrl-Z or kill -STOP -PGID, does not stop it), arms
// PR_SET_PDEATHSIG and checks that baton is still its parent, forks the
// command into a new process group (the command takes the terminal if
// asked, arms PR_SET_PDEATHSIG = SIGKILL against a dying guard, resets
// signal dispositions and execs; an exec error comes back through a
// CLOEXEC pipe), reports the command's pid and exec errno, and then sleeps
// in ppoll(2) on three descriptors until the command has exited:
//   - the control pipe from baton (messages below; end of file = baton is
//     gone),
//   - a timerfd armed at the next SIGTERM / SIGKILL instant, on
//     CLOCK_BOOTTIME where the kernel has it (a deadline is converted from
//     CLOCK_MONOTONIC when it arrives): time the host spends suspended
//     counts, as it does for the lease in the store,
//   - a signalfd for SIGCHLD and its parent-death signal.
// When the command exits it SIGKILLs what the command left in its group,
// reaps it and reports the wait status and what the guard did; when baton
// dies it SIGKILLs the group at once (nobody renews the lease any more).
//
// Thread safety: guard_main() never returns; the rest are plain functions.
#ifndef BATON_CLI_GUARD_H_
#define BATON_CLI_GUARD_H_

#include <signal.h>
#include <sys/types.h>

#include <array>
#include <cstdint>

namespace baton::cli {

// The signals baton forwards to the command's group (the guard ignores
// them when they are sent to itself).
inline constexpr std::array<int, 4> kForwardedSignals = {SIGINT, SIGTERM,
                                                         SIGHUP, SIGQUIT};

// SIGKILL goes this long before the safe deadline, so that the command is
// gone (not only signalled) by it.
inline constexpr std::int64_t kKillLeadNs = 10'000'000;

// "Never" for instants in nanoseconds.
inline constexpr std::int64_t kNever = INT64_MAX;

// fork(2) without the atfork handlers: the guard and the command are
// forked from a multithreaded process and only make raw system calls.
pid_t raw_fork();

// Messages on both pipes: four 64-bit fields, one write(2) each (32 bytes
// < PIPE_BUF, so atomic: never interleaved, never split). Instants are
// CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock on Linux).
enum MessageKind : std::int64_t {
  // guard -> baton (report pipe)
  kStarted = 1,   // a = command pid (= its process group), b = exec errno
  kStopping = 2,  // SIGTERM for a cause: a = the StopCause, b = when SIGKILL
                  // is due, c = when SIGTERM was sent (or, if one was sent
                  // earlier for another cause, when this cause came)
  kExited = 3,    // a = the command's wait status, b = the StopCause bits
                  // of every cause the guard acted on, c = when it was reaped
  // baton -> guard (control pipe)
  kDeadline = 10,  // a = the lease's local safe deadline, b = grace in ns
  kStop = 11,      // the lease is lost: SIGTERM now, SIGKILL at
                   // min(now + grace, deadline - 10 ms)
  kSignal = 12,    // a = a signal of kForwardedSignals for the group
};
enum StopCause : std::int64_t {
  kCauseDeadline = 1,    // no renewal moved the deadline: D - grace came
  kCauseLost = 2,        // baton's loss notice (kStop)
  kCauseMaxRuntime = 4,  // the command ran for --max-runtime
};
struct Message {
  std::int64_t kind = 0;
  std::int64_t a = 0;
  std::int64_t b = 0;
  std::int64_t c = 0;
};
static_assert(sizeof(Message) == 32);

// CLOCK_MONOTONIC now, in ns.
std::int64_t monotonic_ns() noexcept;

// 1: a message, 0: end of file (the writer is gone), -1: error (EAGAIN
// on a non-blocking descriptor with nothing to read).
int read_message(int fd, Message* m);
// One atomic write; false if it failed (EAGAIN on a full non-blocking
// pipe, EPIPE once the reader is gone). Async-signal-safe.
bool write_message(int fd, const Message& m) noexcept;

// Everything the guard and the command need, prepared before the fork:
// after it, only async-signal-safe calls are made (no allocation).
struct SpawnPlan {
  const char* path = nullptr;  // resolved argv[0]
  char* const* argv = nullptr;
  char* const* sh_argv = nullptr;  // "/bin/sh path args..." for ENOEXEC
  char* const* envp = nullptr;
  pid_t baton_pid = 0;
  int report_fd = -1;         // write end of the guard -> baton pipe
  int report_read_fd = -1;    // its read end (baton's; the guard closes it)
  int control_fd = -1;        // read end of the baton -> guard pipe
  int control_write_fd = -1;  // its write end (baton's; the guard closes it)
  int tty_fd = -1;            // >= 0: hand the terminal to the command's group
  // The lease's local safe deadline at the start (CLOCK_MONOTONIC ns;
  // kNever: none) and the grace before it, in ns.
  std::int64_t deadline_ns = kNever;
  std::int64_t grace_ns = 0;
  // SIGTERM this long after the command starts, SIGKILL grace later (0:
  // no limit).
  std::int64_t max_runtime_ns = 0;
  sigset_t empty;
};

// The guard; `plan` was filled before the fork.
[[noreturn]] void guard_main(const SpawnPlan& plan);

}  // namespace baton::cli

#endif  // BATON_CLI_GUARD_H_
