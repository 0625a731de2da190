// cli/guard.cc — the guard process and the command's start (guard.h).
// After fork: async-signal-safe calls only, no allocation.
#include "cli/guard.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace baton::cli {

namespace {

// The guard's parent-death signal: catchable (it arrives on the signalfd),
// so that the guard can kill the command's whole group before it goes.
constexpr int kDeathSignal = SIGUSR1;
// Dispositions the command gets back to default: baton forwards or ignores
// (SIGPIPE) these, the guard uses SIGUSR1 and SIGCHLD. (SIGTTOU too when
// the terminal is handed over.)
constexpr std::array<int, 7> kResetInCommand = {
    SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGCHLD};
// Exit status of a guard or command whose parent died before it could
// arm PR_SET_PDEATHSIG, or of a guard whose baton died (nobody reads it).
constexpr int kOrphaned = 1;

std::int64_t clock_ns(clockid_t clock) noexcept {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void send(int fd, std::int64_t kind, std::int64_t a, std::int64_t b = 0,
          std::int64_t c = 0) {
  Message m;
  m.kind = kind;
  m.a = a;
  m.b = b;
  m.c = c;
  (void)write_message(fd, m);
}

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

// The guard after the command started: the deadline rule, the runtime
// limit and signal forwarding, all instants on `clock` (the timerfd's).
class Guard {
 public:
  Guard(const SpawnPlan& plan, pid_t command, clockid_t clock, int timer_fd,
        int signal_fd)
      : plan_(plan),
        command_(command),
        clock_(clock),
        timer_fd_(timer_fd),
        signal_fd_(signal_fd),
        grace_(plan.grace_ns) {
    const std::int64_t now = clock_ns(clock_);
    deadline_ = from_monotonic(plan.deadline_ns);
    if (plan.max_runtime_ns > 0) runtime_term_at_ = now + plan.max_runtime_ns;
  }

  [[noreturn]] void run() {
    for (;;) {
      // What baton sent so far first (deadlines handed over while the
      // command was being started, too), then what is due.
      read_control();
      act(clock_ns(clock_));
      arm_timer();
      pollfd fds[3] = {{signal_fd_, POLLIN, 0},
                       {timer_fd_, POLLIN, 0},
                       {plan_.control_fd, POLLIN, 0}};
      if (ppoll(fds, 3, nullptr, nullptr) < 0 && errno != EINTR) {
        baton_gone();  // cannot wait any more: do not leave it unguarded
      }
      drain_signals();
      if (command_exited()) finish();
      if (fds[1].revents != 0) {
        std::uint64_t expirations;
        (void)!read(timer_fd_, &expirations, sizeof expirations);
      }
      if (getppid() != plan_.baton_pid) baton_gone();
    }
  }

 private:
  // A CLOCK_MONOTONIC instant on the timer's clock (the same instant when
  // the host was not suspended since; later instants otherwise).
  std::int64_t from_monotonic(std::int64_t mono) const {
    if (mono == kNever) return kNever;
    if (clock_ == CLOCK_MONOTONIC) return mono;
    return mono - clock_ns(CLOCK_MONOTONIC) + clock_ns(clock_);
  }

  std::int64_t lease_kill_at() const {
    const std::int64_t at =
        deadline_ == kNever ? kNever : deadline_ - kKillLeadNs;
    return std::min(at, stop_kill_at_);
  }
  std::int64_t lease_term_at() const {
    const std::int64_t at = deadline_ == kNever ? kNever : deadline_ - grace_;
    return std::min(at, lease_kill_at());
  }
  std::int64_t runtime_kill_at() const {
    return runtime_term_at_ == kNever ? kNever : runtime_term_at_ + grace_;
  }
  std::int64_t kill_at() const {
    return std::min(lease_kill_at(), runtime_kill_at());
  }
  bool lease_stopping() const {
    return (causes_ & (kCauseDeadline | kCauseLost)) != 0;
  }

  // SIGTERM (once, whatever the cause) and the report of this cause.
  void term(StopCause cause, std::int64_t kill_at, std::int64_t now) {
    causes_ |= cause;
    if (!term_sent_) {
      kill(-command_, SIGTERM);
      term_sent_ = true;
    }
    // One offset for both instants, so that their difference is exact.
    const std::int64_t to_mono =
        clock_ == CLOCK_MONOTONIC
            ? 0
            : clock_ns(CLOCK_MONOTONIC) - clock_ns(clock_);
    send(plan_.report_fd, kStopping, cause,
         kill_at == kNever ? kNever : kill_at + to_mono, now + to_mono);
  }

  // Everything due at `now`, SIGTERM before SIGKILL.
  void act(std::int64_t now) {
    if (!lease_stopping() && now >= lease_term_at()) {
      term(kCauseDeadline, lease_kill_at(), now);
    }
    if ((causes_ & kCauseMaxRuntime) == 0 && now >= runtime_term_at_) {
      term(kCauseMaxRuntime, runtime_kill_at(), now);
    }
    if (!kill_sent_ && now >= kill_at()) {
      kill(-command_, SIGKILL);
      kill_sent_ = true;
    }
  }

  void arm_timer() {
    std::int64_t next = kNever;
    if (!lease_stopping()) next = std::min(next, lease_term_at());
    if ((causes_ & kCauseMaxRuntime) == 0) {
      next = std::min(next, runtime_term_at_);
    }
    if (!kill_sent_) next = std::min(next, kill_at());
    itimerspec spec;
    std::memset(&spec, 0, sizeof spec);
    if (next != kNever) {
      // An instant in the past fires at once; 0 would disarm the timer.
      next = std::max<std::int64_t>(next, 1);
      spec.it_value.tv_sec = static_cast<time_t>(next / 1'000'000'000);
      spec.it_value.tv_nsec = static_cast<long>(next % 1'000'000'000);
    }
    timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
  }

  // Every message baton sent so far (the caller then acts on the latest
  // deadline, not on one a later message replaced).
  void read_control() {
    for (;;) {
      Message m;
      const int r = read_message(plan_.control_fd, &m);
      if (r == 0) baton_gone();  // end of file: baton's end is closed
      if (r < 0) return;         // nothing more now
      const std::int64_t now = clock_ns(clock_);
      switch (m.kind) {
        case kDeadline:
          // The latest hand-over rules: baton sends the keeper's deadline
          // in the order it read it, and it moves forward with each
          // renewal.
          deadline_ = from_monotonic(m.a);
          grace_ = std::max<std::int64_t>(m.b, 0);
          break;
        case kStop:
          stop_kill_at_ = std::min(stop_kill_at_, now + grace_);
          if (!lease_stopping()) term(kCauseLost, lease_kill_at(), now);
          break;
        case kSignal:
          for (int sig : kForwardedSignals) {
            if (m.a == sig) kill(-command_, sig);
          }
          break;
        default:
          break;
      }
    }
  }

  void drain_signals() {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof info) ==
           static_cast<ssize_t>(sizeof info)) {
      if (static_cast<int>(info.ssi_signo) == kDeathSignal) baton_gone();
    }
  }

  bool command_exited() const {
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    return waitid(P_PID, static_cast<id_t>(command_), &info,
                  WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == command_;
  }

  // The command exited but is not reaped: its pid still names the group,
  // so the SIGKILL reaches only what it left behind there.
  [[noreturn]] void finish() {
    kill(-command_, SIGKILL);
    int status = 0;
    while (waitpid(command_, &status, 0) < 0 && errno == EINTR) {
    }
    send(plan_.report_fd, kExited, status, causes_, clock_ns(CLOCK_MONOTONIC));
    _exit(0);
  }

  // baton is gone: nobody renews the lease any more.
  [[noreturn]] void baton_gone() {
    kill(-command_, SIGKILL);
    int status = 0;
    while (waitpid(command_, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(kOrphaned);
  }

  const SpawnPlan& plan_;
  const pid_t command_;
  const clockid_t clock_;
  const int timer_fd_;
  const int signal_fd_;
  std::int64_t grace_;
  std::int64_t deadline_ = kNever;
  std::int64_t stop_kill_at_ = kNever;
  std::int64_t runtime_term_at_ = kNever;
  std::int64_t causes_ = 0;
  bool term_sent_ = false;
  bool kill_sent_ = false;
};

// The timerfd: CLOCK_BOOTTIME (counts suspended time), else CLOCK_MONOTONIC
// on a kernel without it.
int make_timer(clockid_t* clock) {
  *clock = CLOCK_BOOTTIME;
  int fd = timerfd_create(*clock, TFD_CLOEXEC | TFD_NONBLOCK);
  if (fd >= 0) return fd;
  *clock = CLOCK_MONOTONIC;
  return timerfd_create(*clock, TFD_CLOEXEC | TFD_NONBLOCK);
}

}  // namespace

pid_t raw_fork() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
  return _Fork();
#else
  return fork();
#endif
}

std::int64_t monotonic_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }

int read_message(int fd, Message* m) {
  for (;;) {
    ssize_t n = read(fd, m, sizeof *m);
    if (n == static_cast<ssize_t>(sizeof *m)) return 1;
    if (n == 0) return 0;
    if (n < 0 && errno == EINTR) continue;
    return -1;
  }
}

bool write_message(int fd, const Message& m) noexcept {
  for (;;) {
    ssize_t n = write(fd, &m, sizeof m);
    if (n == static_cast<ssize_t>(sizeof m)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

[[noreturn]] void guard_main(const SpawnPlan& plan) {
  // A group of its own: stopping baton's group does not stop the guard.
  setpgid(0, 0);
  for (int sig : kForwardedSignals) set_disposition(sig, SIG_IGN);
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGCHLD);
  sigaddset(&block, kDeathSignal);
  sigprocmask(SIG_BLOCK, &block, nullptr);
  prctl(PR_SET_PDEATHSIG, kDeathSignal);
  // baton may have died before prctl: then nobody would ever signal us.
  if (getppid() != plan.baton_pid) _exit(kOrphaned);
  // baton's ends: the control pipe's end of file must mean baton is gone.
  close(plan.control_write_fd);
  close(plan.report_read_fd);

  int exec_pipe[2];
  clockid_t clock;
  const int timer_fd = make_timer(&clock);
  const int signal_fd = signalfd(-1, &block, SFD_CLOEXEC | SFD_NONBLOCK);
  if (timer_fd < 0 || signal_fd < 0 || pipe2(exec_pipe, O_CLOEXEC) != 0 ||
      fcntl(plan.control_fd, F_SETFL, O_NONBLOCK) != 0) {
    send(plan.report_fd, kStarted, 0, errno);
    _exit(126);
  }
  const pid_t self = getpid();
  const pid_t command = raw_fork();
  if (command == 0) {
    close(exec_pipe[0]);
    command_main(plan, exec_pipe[1], self);
  }
  if (command < 0) {
    send(plan.report_fd, kStarted, 0, errno);
    _exit(126);
  }
  setpgid(command, command);  // as the command does: whichever runs first
  // The lowest real-time priority where the process may (root,
  // CAP_SYS_NICE, RLIMIT_RTPRIO >= 1), as the session's notice thread: its
  // margin is 10 ms before the deadline, and on a busy machine an ordinary
  // process can wake later than that. It sleeps almost always and does no
  // I/O, so it starves nothing. Set after the command was forked, and reset
  // on fork, so the command never runs at it.
  sched_param priority{};
  priority.sched_priority = sched_get_priority_min(SCHED_FIFO);
  (void)sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &priority);
  Guard guard(plan, command, clock, timer_fd, signal_fd);
  close(exec_pipe[1]);
  int exec_errno = 0;
  for (;;) {
    ssize_t n = read(exec_pipe[0], &exec_errno, sizeof exec_errno);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof exec_errno)) exec_errno = 0;
    break;
  }
  close(exec_pipe[0]);
  send(plan.report_fd, kStarted, command, exec_errno);
  guard.run();
}

}  // namespace baton::cli
