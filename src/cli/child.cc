// cli/child.cc — the deadline rule, signal forwarding and the terminal
// for `baton run` / `baton elect` (see child.h for the design).
#include "cli/child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "baton/duration.h"
#include "cli/guard.h"

extern char** environ;

namespace baton::cli {

namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::steady_clock;

constexpr const std::array<int, 4>& kForwarded = kForwardedSignals;
// SIGKILL goes this long before the safe deadline, so that the command is
// gone (not only signalled) by it.
constexpr milliseconds kKillLead{10};
// When only a stop flag (no StopNotice) can say "lost", it is read this
// often.
constexpr milliseconds kFlagPoll{20};

// ---------------------------------------------------------------------------
// Signal forwarding to the command's process group.

std::atomic<pid_t> g_group{0};
std::atomic<int> g_pending{0};

// A signal that comes before the group exists is kept in g_pending and
// sent once it does (exactly once: whoever takes it from g_pending).
void forward_signal(int sig) {
  int saved = errno;
  g_pending.store(sig);
  pid_t group = g_group.load();
  if (group > 0 && g_pending.exchange(0) == sig) kill(-group, sig);
  errno = saved;
}

class SignalForwarding {
 public:
  SignalForwarding() {
    static_assert(std::atomic<pid_t>::is_always_lock_free);
    static_assert(std::atomic<int>::is_always_lock_free);
    g_group.store(0);
    g_pending.store(0);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < kForwarded.size(); ++i) {
      sigaction(kForwarded[i], &sa, &old_[i]);
    }
  }
  void start(pid_t group) {
    g_group.store(group);
    if (int sig = g_pending.exchange(0); sig != 0) kill(-group, sig);
  }
  ~SignalForwarding() {
    for (std::size_t i = 0; i < kForwarded.size(); ++i) {
      sigaction(kForwarded[i], &old_[i], nullptr);
    }
    g_group.store(0);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  std::array<struct sigaction, kForwarded.size()> old_{};
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

milliseconds ceil_ms(steady_clock::duration d) {
  if (d <= steady_clock::duration::zero()) return milliseconds::zero();
  return std::chrono::ceil<milliseconds>(d);
}

volatile sig_atomic_t g_latched_signal = 0;

void latch_signal(int sig) { g_latched_signal = sig; }

}  // namespace

// ---------------------------------------------------------------------------

int exit_code_from_wait_status(int status) noexcept {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

Result<std::string> resolve_command(const std::string& name, int* exit_code) {
  auto fail = [&](int code, const std::string& why) -> Error {
    if (exit_code != nullptr) *exit_code = code;
    return Error(Errc::invalid_argument, "cannot run \"" + name + "\": " + why);
  };
  if (name.empty()) return fail(127, "empty command name");
  auto runnable = [](const std::string& path, int* err) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      *err = errno;
      return false;
    }
    if (S_ISDIR(st.st_mode)) {
      *err = EISDIR;
      return false;
    }
    if (access(path.c_str(), X_OK) != 0) {
      *err = errno;
      return false;
    }
    return true;
  };
  int err = 0;
  if (name.find('/') != std::string::npos) {
    if (runnable(name, &err)) return name;
    return fail(err == ENOENT || err == ENOTDIR ? 127 : 126,
                std::strerror(err));
  }
  const char* env_path = std::getenv("PATH");
  const std::string path = env_path != nullptr ? env_path : "/bin:/usr/bin";
  bool denied = false;
  int denied_errno = EACCES;
  for (std::size_t start = 0;;) {
    std::size_t colon = path.find(':', start);
    std::string dir = path.substr(
        start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (runnable(candidate, &err)) return candidate;
    if (err != ENOENT && err != ENOTDIR) {
      denied = true;
      denied_errno = err;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (denied) return fail(126, std::strerror(denied_errno));
  return fail(127, "command not found in PATH");
}

std::string describe_stop(const std::string& what, const StopEvent& event,
                          milliseconds grace) {
  if (event.cause == StopEvent::Cause::lost) {
    return what + " lost (" + event.reason + "); SIGTERM to the command " +
           (event.kill_in > milliseconds::zero()
                ? "now, SIGKILL in " + format_duration(event.kill_in)
                : "and SIGKILL now");
  }
  return what + " not renewed in time: its local safe deadline is " +
         format_duration(event.kill_in) + " away (--grace " +
         format_duration(grace) +
         "); SIGTERM to the command now, SIGKILL at the deadline";
}

StopNotice::StopNotice() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

StopNotice::~StopNotice() {
  if (fd_ >= 0) close(fd_);
}

void StopNotice::notify(const std::string& reason) {
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (reason_.empty()) reason_ = reason;
  }
  notified_.store(true);
  if (fd_ >= 0) {
    std::uint64_t one = 1;
    while (write(fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }
}

std::string StopNotice::reason() const {
  std::lock_guard<std::mutex> guard(mu_);
  return reason_;
}

SignalLatch::SignalLatch() {
  static_assert(kForwarded.size() == 4);
  g_latched_signal = 0;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = latch_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < kForwarded.size(); ++i) {
    sigaction(kForwarded[i], &sa, &old_[i]);
  }
}

SignalLatch::~SignalLatch() {
  for (std::size_t i = 0; i < kForwarded.size(); ++i) {
    sigaction(kForwarded[i], &old_[i], nullptr);
  }
}

int SignalLatch::signal() const noexcept {
  return static_cast<int>(g_latched_signal);
}

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
  auto lost_flag = [&] {
    return (options.notice != nullptr && options.notice->notified()) ||
           (options.stop != nullptr && options.stop->load());
  };
  auto notice_reason = [&] {
    return options.notice != nullptr ? options.notice->reason() : std::string();
  };
  auto deadline = [&] {
    return options.deadline ? options.deadline() : SteadyTime::max();
  };

  SuperviseResult result;
  // The lease is gone already: do not start the command at all.
  if (lost_flag() || steady_clock::now() >= deadline()) {
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

  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return Error(
        Errc::internal,
        std::string("cannot start the command: pipe: ") + std::strerror(errno));
  }

  SignalForwarding forwarding;
  TerminalHandover terminal;

  SpawnPlan plan;
  plan.path = path.c_str();
  plan.argv = argv.data();
  plan.sh_argv = sh_argv.data();
  plan.envp = envp.data();
  plan.baton_pid = getpid();
  plan.report_fd = report[1];
  plan.tty_fd = terminal.fd();
  sigemptyset(&plan.empty);

  // The guard starts with the forwarded signals blocked (it ignores them
  // before unblocking); here they stay pending until forwarding starts.
  sigset_t block, old_mask;
  sigemptyset(&block);
  for (int sig : kForwarded) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  const pid_t guard = raw_fork();
  if (guard == 0) guard_main(plan);
  const int fork_errno = errno;
  close(report[1]);
  struct ReadEnd {
    int fd;
    ~ReadEnd() { close(fd); }
  } read_end{report[0]};

  auto reap_guard = [&] {
    int status = 0;
    while (waitpid(guard, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  };

  if (guard < 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return Error(Errc::internal, std::string("cannot start the command: ") +
                                     std::strerror(fork_errno));
  }
  Message started;
  int got = read_message(report[0], &started);
  if (got != 1 || started.kind != kStarted || started.a <= 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    const int err = got == 1 ? started.b : 0;
    if (got == 1 && started.a > 0) terminal.set_group(started.a);
    reap_guard();
    if (err != 0 && started.a > 0) {
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
  const pid_t group = started.a;
  terminal.set_group(group);
  if (started.b != 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    reap_guard();
    if (spawn_exit_code != nullptr) {
      *spawn_exit_code =
          started.b == ENOENT || started.b == ENOTDIR ? 127 : 126;
    }
    return Error(Errc::invalid_argument, "cannot run \"" + options.argv[0] +
                                             "\": " + std::strerror(started.b));
  }
  forwarding.start(group);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

  // The deadline rule (child.h).
  bool term_sent = false;
  bool kill_sent = false;
  bool notice_seen = false;
  SteadyTime kill_after_notice = SteadyTime::max();
  bool have_status = false;
  int status = 0;
  auto stop_event = [&](StopEvent::Cause cause, SteadyTime now,
                        SteadyTime kill_at) {
    if (!options.on_stop) return;
    StopEvent event;
    event.cause = cause;
    event.kill_in = ceil_ms(kill_at - now);
    event.reason = notice_reason();
    options.on_stop(event);
  };
  for (;;) {
    const SteadyTime now = steady_clock::now();
    const SteadyTime d = deadline();
    if (!notice_seen && lost_flag()) {
      notice_seen = true;
      kill_after_notice =
          d - kKillLead - now > grace ? now + grace : d - kKillLead;
      if (!term_sent) {
        stop_event(StopEvent::Cause::lost, now, kill_after_notice);
        kill(-group, SIGTERM);
        term_sent = true;
      }
    }
    const SteadyTime kill_at =
        std::min(d == SteadyTime::max() ? d : d - kKillLead, kill_after_notice);
    const SteadyTime term_at =
        std::min(d == SteadyTime::max() ? d : d - grace, kill_at);
    if (!term_sent && now >= term_at) {
      stop_event(StopEvent::Cause::deadline_near, now, kill_at);
      kill(-group, SIGTERM);
      term_sent = true;
    }
    if (!kill_sent && now >= kill_at) {
      kill(-group, SIGKILL);
      kill_sent = true;
    }

    SteadyTime next = SteadyTime::max();
    if (!term_sent) next = std::min(next, term_at);
    if (!kill_sent) next = std::min(next, kill_at);
    if (!notice_seen && options.stop != nullptr && options.notice == nullptr) {
      next = std::min(next, now + kFlagPoll);
    }
    pollfd fds[2];
    nfds_t nfds = 0;
    fds[nfds++] = pollfd{report[0], POLLIN, 0};
    if (!notice_seen && options.notice != nullptr &&
        options.notice->fd() >= 0) {
      fds[nfds++] = pollfd{options.notice->fd(), POLLIN, 0};
    }
    timespec ts;
    timespec* timeout = nullptr;
    if (next != SteadyTime::max()) {
      // ppoll sleeps on CLOCK_MONOTONIC, as steady_clock; round up so that
      // we never wake just before the instant.
      ts = to_timespec(next - steady_clock::now() + nanoseconds(1));
      timeout = &ts;
    }
    int n = ppoll(fds, nfds, timeout, nullptr);
    if (n <= 0) continue;  // timeout or EINTR: re-evaluate
    if (fds[0].revents != 0) {
      Message m;
      int r = read_message(report[0], &m);
      if (r == 1 && m.kind == kExited) {
        status = m.a;
        have_status = true;
      } else if (r != 1) {
        break;  // the guard is gone
      }
    }
  }
  const int guard_status = reap_guard();
  if (!have_status) {
    // The guard died without relaying (killed from outside): its command
    // got SIGKILL from PR_SET_PDEATHSIG; make sure nothing of it is left.
    kill(-group, SIGKILL);
    status = guard_status;
  }
  result.exit_code = exit_code_from_wait_status(status);
  result.stopped = term_sent;
  return result;
}

}  // namespace baton::cli
