// cli/child.h — running the user's command under `baton run` / `baton elect`
// so that it never outlives the lease (CONTRACT rule 13; docs/cli.md).
//
// Process layout:
//
//   baton ── guard (own group) ── command (its own process group) ── ...
//
// The guard (cli/guard.h) is forked (not exec'd) from baton. It forks and
// execs the command in a new process group and is the only process that
// ever signals that group: baton never does, so a late signal from a baton
// that was stopped cannot reach a process that reused the pid of a
// command the guard has reaped. baton talks to the guard over two pipes:
//
//   control (baton -> guard): the lease's local safe deadline D, in the
//     plan before the start and again after each successful renewal
//     (written by the keeper's on_renewed itself, DeadlineChannel); "stop
//     now" on a loss notice; the signals baton is sent, to be forwarded.
//   report (guard -> baton): the command's pid, each SIGTERM the guard sent
//     and why, and the command's wait status.
//
// The guard enforces, by itself, with G = grace:
//   now >= D - G                 -> SIGTERM to the group (once)
//   now >= D - 10ms              -> SIGKILL to the group
//   stop notice at time t        -> SIGTERM at once, SIGKILL at
//                                   min(t + G, D - 10ms)
//   --max-runtime M              -> SIGTERM M after the start, SIGKILL G
//                                   later
//   baton dies                   -> SIGKILL to the group at once
//   the command exits            -> SIGKILL to what it left in its group
// As a backstop, baton SIGKILLs the guard (its own child) when D passes
// and the guard has not reported the command gone: a stopped guard cannot
// keep the command alive either (the command has PR_SET_PDEATHSIG =
// SIGKILL against its guard).
// (SIGKILL 10 ms early so that the command is gone, not only signalled, by
// the deadline.) So the command is gone by D whether baton runs, is
// stopped (SIGSTOP, a cgroup freeze), starved of CPU, or dead: a renewal
// that succeeds moves D forward, one that never arrives cannot keep the
// command alive.
//
// baton's supervisor sleeps in ppoll(2) on the report pipe and the loss
// notice, until the deadline the guard has (the backstop) — no polling. A baton
// that was stopped past D reads, when it runs again, what the guard did
// (SIGTERM and why, the exit status) and reports it; it never signals or
// restarts the command.
//
// Signal forwarding: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to baton are
// written to the control pipe by the signal handler (write(2) is
// async-signal-safe) and sent by the guard to the command's process group.
// (Keys typed on the terminal reach the group directly while it owns the
// terminal.)
//
// Thread safety: one supervise() at a time per process (it owns the signal
// handlers), called from a thread that lives until it returns (the guard's
// parent-death signal fires when the forking thread exits). StopNotice and
// DeadlineChannel may be notified from any thread.
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

// The hand-over of the lease's local safe deadline to the guard. The
// keeper's on_renewed calls renewed() after each successful renewal, and
// the deadline is written to the guard's control pipe at once, from the
// renewing thread (no hop through the supervising thread, whose wake-up
// could come late on a busy machine). It is the only writer of deadlines,
// so they reach the guard in the order of the renewals. Open only while
// supervise() runs; renewed() does nothing otherwise.
//
// Thread safety: every method may be called from any thread.
class DeadlineChannel {
 public:
  DeadlineChannel() = default;
  DeadlineChannel(const DeadlineChannel&) = delete;
  DeadlineChannel& operator=(const DeadlineChannel&) = delete;

  void renewed(SteadyTime deadline) noexcept;
  // supervise(): from now on write to `fd` (non-blocking), with `grace`;
  // `initial` is the deadline the guard starts with.
  void open(int fd, std::chrono::milliseconds grace, SteadyTime initial);
  void close();  // before the descriptor is closed
  // The deadline the guard was last handed (the initial one if none since).
  SteadyTime last_sent() const;

 private:
  mutable std::mutex mu_;
  int fd_ = -1;                // guarded by mu_
  std::int64_t grace_ns_ = 0;  // guarded by mu_
  SteadyTime sent_{};          // guarded by mu_
};

// Why the guard signalled the command (passed to on_stop).
struct StopEvent {
  enum class Cause {
    deadline_near,  // no renewal moved D in time and D - grace has come
    lost,           // loss notice (or the stop flag) before that
    max_runtime,    // the command ran for SuperviseOptions::max_runtime
    // The deadline passed and the guard had not reported the command gone:
    // baton SIGKILLed the guard (the command dies with it).
    guard_unresponsive,
  };
  Cause cause = Cause::deadline_near;
  // Time from the SIGTERM until SIGKILL (zero: SIGKILL at once).
  std::chrono::milliseconds kill_in{0};
  // How long before baton read the guard's report the SIGTERM was sent:
  // more than a moment when baton itself was stopped or starved.
  std::chrono::milliseconds late{0};
  // The loss notice's reason (Cause::lost).
  std::string reason;
};

// A report older than this is told as past ("...ago, while baton was not
// running").
inline constexpr std::chrono::milliseconds kLateReport{200};

// "<what> lost (<reason>); SIGTERM to the command now, SIGKILL in 1s", or
// "<what> not renewed in time: ...": the line printed (after "baton:
// lock_lost: ") when the lease makes the guard stop the command.
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
  // Fed by the keeper's on_renewed: each new deadline goes to the guard.
  // Null: only the deadline at the start is handed over.
  DeadlineChannel* channel = nullptr;
  std::chrono::milliseconds grace{10'000};
  // SIGTERM this long after the start, SIGKILL grace later (0: no limit).
  std::chrono::milliseconds max_runtime{0};
  // Called from the supervising thread when baton learns of a SIGTERM the
  // guard sent, once per cause (not for forwarded signals).
  std::function<void(const StopEvent&)> on_stop;
};

struct SuperviseResult {
  int exit_code = 0;         // the command's status (128+N if killed by N)
  bool stopped = false;      // the lease made the guard signal (or baton not
                             // start) it
  bool started = true;       // false: the lease was gone before the start
                             // (on_stop is not called then)
  bool max_runtime = false;  // the guard signalled it for max_runtime
};

// The dispositions of SIGINT, SIGTERM, SIGHUP and SIGQUIT, in that order.
using SavedHandlers = std::array<struct sigaction, 4>;
// Sets `handler` (SA_RESTART) for those four, saving the old ones in *old;
// restore_forwarded_signals puts them back.
void handle_forwarded_signals(void (*handler)(int), SavedHandlers* old);
void restore_forwarded_signals(const SavedHandlers& old);

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
  SavedHandlers old_{};
};

// Starts the command under a guard, hands the guard the deadline and the
// signals, and waits until the command is gone. Fails (nothing keeps running)
// if the command cannot be started; then *spawn_exit_code is 127 (not
// found) or 126 (not executable), as a shell would exit.
Result<SuperviseResult> supervise(const SuperviseOptions& options,
                                  int* spawn_exit_code);

}  // namespace baton::cli

#endif  // BATON_CLI_CHILD_H_
