// cli/child.h — running the user's command under `baton run` / `baton elect`
// so that it never outlives the lease (CONTRACT rule 13; docs/cli.md).
//
// Process layout:
//
//   baton ── guard ── command (its own process group) ── grandchildren
//
// The guard is forked (not exec'd) from baton. It forks and execs the
// command in a new process group, relays the command's wait status to baton
// through a pipe, and SIGKILLs the whole group when baton dies (it gets a
// PR_SET_PDEATHSIG signal) or when the command exits (stragglers it left
// in its group). The command itself has PR_SET_PDEATHSIG = SIGKILL against
// a dying guard. When baton is the foreground job of its terminal, the
// terminal is handed to the command's group and taken back afterwards.
//
// Deadline rule, with D = deadline() re-read at every wake-up (it moves
// forward on each successful renewal) and G = grace:
//   now >= D - G                 -> SIGTERM to the group (once)
//   now >= D - 10ms              -> SIGKILL to the group
//   loss notice at time t        -> SIGTERM at once, SIGKILL at
//                                   min(t + G, D - 10ms)
// (SIGKILL 10 ms early so that the command is gone, not only signalled, by
// the deadline.)
// The supervisor sleeps in ppoll(2) until the next of these instants, the
// command's end, or a notice — no polling.
//
// Signal forwarding: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to baton are
// sent to the command's process group. (Keys typed on the terminal reach
// the group directly while it owns the terminal.)
//
// Thread safety: one supervise() at a time per process (it owns the signal
// handlers), called from a thread that lives until it returns (the guard's
// parent-death signal fires when the forking thread exits). StopNotice may
// be notified from any thread.
#ifndef BATON_CLI_CHILD_H_
#define BATON_CLI_CHILD_H_

#include <signal.h>
#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "baton/error.h"

namespace baton::cli {

using EnvList = std::vector<std::pair<std::string, std::string>>;
using SteadyTime = std::chrono::steady_clock::time_point;

// A wait(2) status as a shell would report it: the exit status, or 128+N if
// killed by signal N.
int exit_code_from_wait_status(int status) noexcept;

// argv[0] looked up as execvp(3) would (PATH, or "/bin:/usr/bin" if unset;
// names with a '/' are used as they are). Resolved before anything is
// forked, so that the child does not allocate. On failure *exit_code is
// 127 (not found) or 126 (found, not executable) and the error says why.
Result<std::string> resolve_command(const std::string& name, int* exit_code);

// The "lease is lost" notice of a LeaseKeeper / Elector, wired to the
// supervisor: notify() (from the on_lost callback, any thread) records the
// reason and wakes the supervisor at once.
class StopNotice {
 public:
  StopNotice();
  ~StopNotice();
  StopNotice(const StopNotice&) = delete;
  StopNotice& operator=(const StopNotice&) = delete;

  void notify(const std::string& reason);  // the first reason is kept
  bool notified() const noexcept { return notified_.load(); }
  std::string reason() const;
  int fd() const noexcept { return fd_; }  // readable once notified

 private:
  int fd_ = -1;  // eventfd
  std::atomic<bool> notified_{false};
  mutable std::mutex mu_;
  std::string reason_;
};

// Why the supervisor signals the command (passed to on_stop).
struct StopEvent {
  enum class Cause {
    deadline_near,  // no renewal succeeded and D - grace has come
    lost,           // loss notice (or the stop flag) before that
  };
  Cause cause = Cause::deadline_near;
  // Time from now until SIGKILL (zero: SIGKILL now).
  std::chrono::milliseconds kill_in{0};
  // The loss notice's reason (Cause::lost).
  std::string reason;
};

// "<what> lost (<reason>); SIGTERM to the command now, SIGKILL in 1s", or
// "<what> not renewed in time: ...": the line printed (after "baton:
// lock_lost: ") when the lease makes baton stop the command.
std::string describe_stop(const std::string& what, const StopEvent& event,
                          std::chrono::milliseconds grace);

struct SuperviseOptions {
  std::vector<std::string> argv;  // argv[0] as the command will see it
  // The program to execute: resolve_command(argv[0]); empty = resolved
  // here.
  std::string path;
  EnvList env;  // added to (or replacing in) the environment
  // The lease's local safe deadline (rule 14), read at every wake-up.
  // Unset: no deadline.
  std::function<SteadyTime()> deadline;
  // The loss notice (wakes the supervisor) and/or a flag read at every
  // wake-up (e.g. the keeper's cancelled()). Either may be null.
  StopNotice* notice = nullptr;
  const std::atomic<bool>* stop = nullptr;
  std::chrono::milliseconds grace{10'000};
  // Called once from the supervising thread just before the first SIGTERM
  // that the lease causes (not for forwarded signals).
  std::function<void(const StopEvent&)> on_stop;
};

struct SuperviseResult {
  int exit_code = 0;     // the command's status (128+N if killed by N)
  bool stopped = false;  // the lease made baton signal (or not start) it
  bool started = true;   // false: the lease was gone before the start
                         // (on_stop is not called then)
};

// While alive, SIGINT/SIGTERM/SIGHUP/SIGQUIT do not kill the process but
// are recorded; signal() returns the last one (0 = none). Restores the
// previous handlers on destruction. For waits where no child runs yet.
class SignalLatch {
 public:
  SignalLatch();
  ~SignalLatch();
  SignalLatch(const SignalLatch&) = delete;
  SignalLatch& operator=(const SignalLatch&) = delete;
  int signal() const noexcept;

 private:
  std::array<struct sigaction, 4> old_{};  // SIGINT, SIGTERM, SIGHUP, SIGQUIT
};

// Starts the command under a guard, forwards signals, applies the deadline
// rule and waits until the command is gone. Fails (nothing keeps running)
// if the command cannot be started; then *spawn_exit_code is 127 (not
// found) or 126 (not executable), as a shell would exit.
Result<SuperviseResult> supervise(const SuperviseOptions& options,
                                  int* spawn_exit_code);

}  // namespace baton::cli

#endif  // BATON_CLI_CHILD_H_
