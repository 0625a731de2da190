// cli/child_util.cc — the small parts of running the command (child.h):
// looking it up, its exit status, the loss notice and the renewal wake-up,
// the signal latch, and the lines printed when the guard stops it.
#include <errno.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "baton/duration.h"
#include "cli/child.h"
#include "cli/guard.h"

namespace baton::cli {

namespace {

using std::chrono::milliseconds;

volatile sig_atomic_t g_latched_signal = 0;

void latch_signal(int sig) { g_latched_signal = sig; }

}  // namespace

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
  const bool late = event.late > kLateReport;
  const std::string then =
      late ? "; while baton was not running (stopped or starved), the guard "
             "sent SIGTERM to the command " +
                 format_duration(event.late) + " ago"
           : "; SIGTERM to the command now";
  if (event.cause == StopEvent::Cause::max_runtime) {
    return what + then + ", SIGKILL " +
           (late ? format_duration(event.kill_in) + " after it"
                 : "in " + format_duration(event.kill_in)) +
           " (--grace)";
  }
  if (event.cause == StopEvent::Cause::guard_unresponsive) {
    return what +
           " not renewed in time, and the command's guard did not stop it "
           "by the local safe deadline (stopped or not scheduled): SIGKILL "
           "to the guard now; the command dies with it";
  }
  if (event.cause == StopEvent::Cause::lost) {
    if (late) {
      return what + " lost (" + event.reason + ")" + then + ", SIGKILL " +
             format_duration(event.kill_in) + " after it";
    }
    return what + " lost (" + event.reason + "); SIGTERM to the command " +
           (event.kill_in > milliseconds::zero()
                ? "now, SIGKILL in " + format_duration(event.kill_in)
                : "and SIGKILL now");
  }
  if (late) {
    return what + " not renewed in time" + then + ", --grace " +
           format_duration(grace) +
           " before its local safe deadline, and SIGKILL at the deadline";
  }
  return what + " not renewed in time: its local safe deadline is " +
         format_duration(event.kill_in) + " away (--grace " +
         format_duration(grace) +
         "); SIGTERM to the command now, SIGKILL at the deadline";
}

void DeadlineChannel::renewed(SteadyTime deadline) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  Message m;
  m.kind = kDeadline;
  m.a = std::chrono::duration_cast<std::chrono::nanoseconds>(
            deadline.time_since_epoch())
            .count();
  m.b = grace_ns_;
  // Non-blocking: a guard that does not read (stopped) cannot hold the
  // renewal thread up; it acts on the deadline it has, and last_sent()
  // keeps saying so.
  if (write_message(fd_, m)) sent_ = deadline;
}

void DeadlineChannel::open(int fd, milliseconds grace, SteadyTime initial) {
  std::lock_guard<std::mutex> lock(mu_);
  fd_ = fd;
  grace_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(grace).count();
  sent_ = initial;
}

void DeadlineChannel::close() {
  std::lock_guard<std::mutex> lock(mu_);
  fd_ = -1;
}

SteadyTime DeadlineChannel::last_sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_;
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

void handle_forwarded_signals(void (*handler)(int), SavedHandlers* old) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) {
    sigaction(kForwardedSignals[i], &sa, &(*old)[i]);
  }
}

void restore_forwarded_signals(const SavedHandlers& old) {
  for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) {
    sigaction(kForwardedSignals[i], &old[i], nullptr);
  }
}

SignalLatch::SignalLatch() {
  g_latched_signal = 0;
  handle_forwarded_signals(latch_signal, &old_);
}

SignalLatch::~SignalLatch() { restore_forwarded_signals(old_); }

int SignalLatch::signal() const noexcept {
  return static_cast<int>(g_latched_signal);
}

}  // namespace baton::cli
