// cli/child.cc — supervise(): the command under its guard, the deadline
// and the signals handed to the guard, the terminal (see child.h for the
// design; the guard itself is guard.cc, the small parts child_util.cc).
#include "cli/child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "cli/guard.h"

extern char** environ;

namespace baton::cli {

namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::steady_clock;

// When only a stop flag (no StopNotice) can say "lost", it is read this
// often.
constexpr milliseconds kFlagPoll{20};

// ---------------------------------------------------------------------------
// Signal forwarding: to the guard, which signals the command's group.

std::atomic<int> g_control{-1};  // the control pipe's write end
std::atomic<int> g_pending{0};

void send_signal(int fd, int sig) {
  Message m;
  m.kind = kSignal;
  m.a = sig;
  (void)write_message(fd, m);
}

// A signal that comes before the guard runs is kept in g_pending and sent
// once it does (exactly once: whoever takes it from g_pending).
void forward_signal(int sig) {
  int saved = errno;
  g_pending.store(sig);
  const int fd = g_control.load();
  if (fd >= 0 && g_pending.exchange(0) == sig) send_signal(fd, sig);
  errno = saved;
}

class SignalForwarding {
 public:
  SignalForwarding() {
    static_assert(std::atomic<int>::is_always_lock_free);
    g_control.store(-1);
    g_pending.store(0);
    handle_forwarded_signals(forward_signal, &old_);
  }
  void start(int control_fd) {
    g_control.store(control_fd);
    if (int sig = g_pending.exchange(0); sig != 0) send_signal(control_fd, sig);
  }
  ~SignalForwarding() {
    restore_forwarded_signals(old_);
    g_control.store(-1);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  SavedHandlers old_{};
};

// Hands the terminal to the command's group when baton is the foreground
// job of its controlling terminal; takes it back on destruction. SIGTTOU is
// ignored meanwhile (baton is a background job then, and still writes to
// stderr and calls tcsetpgrp).
class TerminalHandover {
 public:
  TerminalHandover() {
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return;
    if (tcgetpgrp(fd) != getpgrp()) {
      close(fd);
      return;
    }
    fd_ = fd;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTTOU, &sa, &old_ttou_);
  }
  ~TerminalHandover() {
    if (fd_ < 0) return;
    if (group_ > 0 && tcgetpgrp(fd_) == group_) tcsetpgrp(fd_, getpgrp());
    sigaction(SIGTTOU, &old_ttou_, nullptr);
    close(fd_);
  }
  TerminalHandover(const TerminalHandover&) = delete;
  TerminalHandover& operator=(const TerminalHandover&) = delete;

  int fd() const { return fd_; }
  void set_group(pid_t group) { group_ = group; }

 private:
  int fd_ = -1;
  pid_t group_ = 0;
  struct sigaction old_ttou_;
};

// The environment for the child: ours, with `extra` added or replaced.
std::vector<std::string> child_environment(const EnvList& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& [name, value] : extra) {
      if (entry.size() > name.size() && entry.substr(0, name.size()) == name &&
          entry[name.size()] == '=') {
        replaced = true;
        break;
      }
    }
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

timespec to_timespec(nanoseconds d) {
  if (d < nanoseconds::zero()) d = nanoseconds::zero();
  timespec ts;
  ts.tv_sec = static_cast<time_t>(d.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(d.count() % 1'000'000'000);
  return ts;
}

}  // namespace

namespace {

// Both pipes of one supervision; closes what is still open.
struct Pipes {
  int report[2] = {-1, -1};   // guard -> baton
  int control[2] = {-1, -1};  // baton -> guard
  Pipes() = default;
  Pipes(const Pipes&) = delete;
  Pipes& operator=(const Pipes&) = delete;
  ~Pipes() {
    for (int fd : {report[0], report[1], control[0], control[1]}) {
      if (fd >= 0) close(fd);
    }
  }
  static void close_end(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

std::int64_t to_ns(SteadyTime t) {
  if (t == SteadyTime::max()) return kNever;
  return std::chrono::duration_cast<nanoseconds>(t.time_since_epoch()).count();
}

milliseconds ns_to_ms(std::int64_t ns) {
  return ns <= 0 ? milliseconds::zero()
                 : std::chrono::ceil<milliseconds>(nanoseconds(ns));
}

StopEvent::Cause cause_of(std::int64_t cause) {
  switch (cause) {
    case kCauseLost:
      return StopEvent::Cause::lost;
    case kCauseMaxRuntime:
      return StopEvent::Cause::max_runtime;
    default:
      return StopEvent::Cause::deadline_near;
  }
}

// After the start: hands the guard each new deadline and the loss notice,
// reports each SIGTERM the guard sent, until the guard reports the exit.
class Supervisor {
 public:
  Supervisor(const SuperviseOptions& options, int report_fd, int control_fd,
             SteadyTime initial)
      : options_(options),
        report_fd_(report_fd),
        control_fd_(control_fd),
        initial_(initial) {}

  // Returns the command's wait status (or the guard's, if it died without
  // a report) once the guard is gone.
  int run(pid_t guard) {
    for (;;) {
      if (!backstopped_ && steady_clock::now() >= guards_deadline() &&
          !gone_by_now()) {
        backstop(guard);
      }
      if (!stop_sent_ && lost()) {
        Message m;
        m.kind = kStop;
        m.a = monotonic_ns();
        (void)write_message(control_fd_, m);
        stop_sent_ = true;
      }
      pollfd fds[2];
      nfds_t n = 0;
      fds[n++] = pollfd{report_fd_, POLLIN, 0};
      if (!stop_sent_ && options_.notice != nullptr &&
          options_.notice->fd() >= 0) {
        fds[n++] = pollfd{options_.notice->fd(), POLLIN, 0};
      }
      // Wake at the deadline the guard has (the backstop; a renewal moves
      // it meanwhile, read again then), and every kFlagPoll when only a
      // flag can say "lost".
      SteadyTime wake = backstopped_ ? SteadyTime::max() : guards_deadline();
      if (!stop_sent_ && options_.stop != nullptr &&
          options_.notice == nullptr) {
        wake = std::min(wake, steady_clock::now() + kFlagPoll);
      }
      timespec poll_ts;
      if (wake != SteadyTime::max()) {
        // ppoll sleeps on CLOCK_MONOTONIC, as steady_clock; round up so
        // that it never wakes just before the instant.
        poll_ts = to_timespec(wake - steady_clock::now() + nanoseconds(1));
      }
      if (ppoll(fds, n, wake != SteadyTime::max() ? &poll_ts : nullptr,
                nullptr) <= 0) {
        continue;  // timeout or EINTR: re-evaluate
      }
      if (fds[0].revents != 0 && !read_report()) break;
    }
    int status = 0;
    while (waitpid(guard, &status, 0) < 0 && errno == EINTR) {
    }
    return have_status_ ? status_ : status;
  }

  std::int64_t causes() const { return causes_; }

 private:
  // The deadline the guard has: the last one handed over.
  SteadyTime guards_deadline() const {
    return options_.channel != nullptr ? options_.channel->last_sent()
                                       : initial_;
  }

  // Reads what the guard has reported so far, without waiting; true once it
  // reported the exit (or is gone).
  bool gone_by_now() {
    for (;;) {
      pollfd p{report_fd_, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) return false;
      if (!read_report()) return true;
    }
  }

  // The deadline the guard has passed and the command is not reported
  // gone: the guard does not act (stopped, or not scheduled). SIGKILL to
  // the guard — baton's own child, whose pid cannot have been reused —
  // and the command dies with it (its PR_SET_PDEATHSIG); processes the
  // command started in its group are not reached.
  void backstop(pid_t guard) {
    backstopped_ = true;
    kill(guard, SIGKILL);
    causes_ |= kCauseDeadline;
    if (options_.on_stop) {
      StopEvent event;
      event.cause = StopEvent::Cause::guard_unresponsive;
      options_.on_stop(event);
    }
  }

  bool lost() const {
    return (options_.notice != nullptr && options_.notice->notified()) ||
           (options_.stop != nullptr && options_.stop->load());
  }

  // One report; false once the guard has reported the exit or is gone.
  bool read_report() {
    Message m;
    if (read_message(report_fd_, &m) != 1) return false;
    if (m.kind == kExited) {
      status_ = static_cast<int>(m.a);
      causes_ |= m.b;
      have_status_ = true;
      return false;
    }
    if (m.kind == kStopping) {
      causes_ |= m.a;
      if (options_.on_stop) {
        StopEvent event;
        event.cause = cause_of(m.a);
        event.kill_in = ns_to_ms(m.b - m.c);
        event.late = ns_to_ms(monotonic_ns() - m.c);
        if (options_.notice != nullptr)
          event.reason = options_.notice->reason();
        options_.on_stop(event);
      }
    }
    return true;
  }

  const SuperviseOptions& options_;
  const int report_fd_;
  const int control_fd_;
  const SteadyTime initial_;  // the deadline in the guard's plan
  bool stop_sent_ = false;
  bool backstopped_ = false;
  bool have_status_ = false;
  int status_ = 0;
  std::int64_t causes_ = 0;
};

// The guard's first report: the command's pid, or why it did not start.
// On failure the guard is reaped and *spawn_exit_code set as a shell would.
// *group is the command's group whenever it was forked (the terminal may
// have to be taken back from it).
Result<pid_t> await_start(const SuperviseOptions& options, int report_fd,
                          pid_t guard, pid_t* group, int* spawn_exit_code) {
  auto reap_guard = [&] {
    int status = 0;
    while (waitpid(guard, &status, 0) < 0 && errno == EINTR) {
    }
  };
  Message started;
  const int got = read_message(report_fd, &started);
  const int err = got == 1 ? static_cast<int>(started.b) : 0;
  if (got == 1 && started.kind == kStarted && started.a > 0) {
    *group = static_cast<pid_t>(started.a);
  }
  if (got == 1 && started.kind == kStarted && started.a > 0 && err == 0) {
    return static_cast<pid_t>(started.a);
  }
  // The command's exit (126/127) after a failed exec is reported next.
  reap_guard();
  if (err != 0 && got == 1 && started.a > 0) {
    if (spawn_exit_code != nullptr) {
      *spawn_exit_code = err == ENOENT || err == ENOTDIR ? 127 : 126;
    }
    return Error(Errc::invalid_argument, "cannot run \"" + options.argv[0] +
                                             "\": " + std::strerror(err));
  }
  return Error(Errc::internal,
               std::string("cannot start the command") +
                   (err != 0 ? std::string(": ") + std::strerror(err) : ""));
}

}  // namespace

Result<SuperviseResult> supervise(const SuperviseOptions& options,
                                  int* spawn_exit_code) {
  if (options.argv.empty() || options.argv[0].empty()) {
    if (spawn_exit_code != nullptr) *spawn_exit_code = 64;
    return Error(Errc::invalid_argument,
                 "no command given (put it after \"--\")");
  }
  std::string path = options.path;
  if (path.empty()) {
    auto resolved = resolve_command(options.argv[0], spawn_exit_code);
    if (!resolved) return resolved.error();
    path = *resolved;
  }
  const milliseconds grace = std::max(options.grace, milliseconds::zero());
  auto deadline_now = [&] {
    return options.deadline ? options.deadline() : SteadyTime::max();
  };
  SuperviseResult result;
  // The lease is gone already: do not start the command at all.
  if ((options.notice != nullptr && options.notice->notified()) ||
      (options.stop != nullptr && options.stop->load()) ||
      steady_clock::now() >= deadline_now()) {
    result.started = false;
    result.stopped = true;
    return result;
  }

  // Everything the children use, built before the fork.
  std::vector<std::string> argv_storage = options.argv;
  std::vector<std::string> env_storage = child_environment(options.env);
  std::vector<std::string> sh_storage = {"/bin/sh", path};
  sh_storage.insert(sh_storage.end(), options.argv.begin() + 1,
                    options.argv.end());
  std::vector<char*> argv = pointers(argv_storage);
  std::vector<char*> envp = pointers(env_storage);
  std::vector<char*> sh_argv = pointers(sh_storage);

  Pipes pipes;
  if (pipe2(pipes.report, O_CLOEXEC) != 0 ||
      pipe2(pipes.control, O_CLOEXEC) != 0 ||
      fcntl(pipes.control[1], F_SETFL, O_NONBLOCK) != 0) {
    return Error(
        Errc::internal,
        std::string("cannot start the command: pipe: ") + std::strerror(errno));
  }
  // Renewals from now on reach the control pipe, to be read by the guard
  // before it acts; the plan carries the deadline read after this.
  struct OpenChannel {
    DeadlineChannel* channel;
    ~OpenChannel() {
      if (channel != nullptr) channel->close();  // before the pipe closes
    }
  } open_channel{options.channel};
  if (options.channel != nullptr) {
    options.channel->open(pipes.control[1], grace, deadline_now());
  }
  const SteadyTime deadline = deadline_now();

  SignalForwarding forwarding;
  TerminalHandover terminal;

  SpawnPlan plan;
  plan.path = path.c_str();
  plan.argv = argv.data();
  plan.sh_argv = sh_argv.data();
  plan.envp = envp.data();
  plan.baton_pid = getpid();
  plan.report_fd = pipes.report[1];
  plan.report_read_fd = pipes.report[0];
  plan.control_fd = pipes.control[0];
  plan.control_write_fd = pipes.control[1];
  plan.tty_fd = terminal.fd();
  plan.deadline_ns = to_ns(deadline);
  plan.grace_ns = std::chrono::duration_cast<nanoseconds>(grace).count();
  plan.max_runtime_ns = std::chrono::duration_cast<nanoseconds>(
                            std::max(options.max_runtime, milliseconds::zero()))
                            .count();
  sigemptyset(&plan.empty);

  // The guard starts with the forwarded signals blocked (it ignores them
  // before anything else); here they stay pending until forwarding starts.
  sigset_t block, old_mask;
  sigemptyset(&block);
  for (int sig : kForwardedSignals) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  const pid_t guard = raw_fork();
  if (guard == 0) guard_main(plan);
  const int fork_errno = errno;
  Pipes::close_end(pipes.report[1]);
  Pipes::close_end(pipes.control[0]);
  if (guard < 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return Error(Errc::internal, std::string("cannot start the command: ") +
                                     std::strerror(fork_errno));
  }
  setpgid(guard, guard);  // as the guard does: whichever runs first
  pid_t forked = 0;
  auto group =
      await_start(options, pipes.report[0], guard, &forked, spawn_exit_code);
  if (forked > 0) terminal.set_group(forked);
  if (!group) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return group.error();
  }
  forwarding.start(pipes.control[1]);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

  Supervisor supervisor(options, pipes.report[0], pipes.control[1], deadline);
  const int status = supervisor.run(guard);
  // A guard killed from outside takes the command with it (the command's
  // PR_SET_PDEATHSIG); baton never signals the group itself.
  result.exit_code = exit_code_from_wait_status(status);
  result.stopped = (supervisor.causes() & (kCauseDeadline | kCauseLost)) != 0;
  result.max_runtime = (supervisor.causes() & kCauseMaxRuntime) != 0;
  return result;
}

}  // namespace baton::cli
