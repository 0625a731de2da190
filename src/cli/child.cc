// cli/child.cc — spawn, signal forwarding and graceful stop of a child.
#include "cli/child.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <thread>

extern char** environ;

namespace baton::cli {

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr milliseconds kPollInterval{20};
constexpr std::array<int, 4> kForwarded = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

volatile sig_atomic_t g_child_pid = 0;

void forward_signal(int sig, siginfo_t* info, void* /*context*/) {
  int saved = errno;
  bool from_terminal = info != nullptr && info->si_code == SI_KERNEL;
  pid_t pid = static_cast<pid_t>(g_child_pid);
  if (!from_terminal && pid > 0) kill(pid, sig);
  errno = saved;
}

// Installs forward_signal for kForwarded; restores the old handlers on
// destruction.
class SignalForwarding {
 public:
  explicit SignalForwarding(pid_t pid) {
    g_child_pid = pid;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < kForwarded.size(); ++i) {
      sigaction(kForwarded[i], &sa, &old_[i]);
    }
  }
  ~SignalForwarding() {
    for (std::size_t i = 0; i < kForwarded.size(); ++i) {
      sigaction(kForwarded[i], &old_[i], nullptr);
    }
    g_child_pid = 0;
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  std::array<struct sigaction, kForwarded.size()> old_{};
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

// Non-blocking reap; returns the wait status if the child has exited.
std::optional<int> try_reap(pid_t pid) {
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r == 0) return std::nullopt;
    if (errno == EINTR) continue;
    return 0;  // ECHILD: already reaped; nothing better to report
  }
}

int reap_blocking(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 0;
  }
  return status;
}

// SIGTERM, wait up to `grace`, then SIGKILL. Returns the wait status.
int stop_child(pid_t pid, milliseconds grace) {
  kill(pid, SIGTERM);
  auto deadline = steady_clock::now() + grace;
  while (steady_clock::now() < deadline) {
    if (auto status = try_reap(pid)) return *status;
    std::this_thread::sleep_for(kPollInterval);
  }
  if (auto status = try_reap(pid)) return *status;
  kill(pid, SIGKILL);
  return reap_blocking(pid);
}

volatile sig_atomic_t g_latched_signal = 0;

void latch_signal(int sig) { g_latched_signal = sig; }

}  // namespace

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

int exit_code_from_wait_status(int status) noexcept {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

Result<SuperviseResult> supervise(const SuperviseOptions& options,
                                  int* spawn_exit_code) {
  if (options.argv.empty() || options.argv[0].empty()) {
    if (spawn_exit_code != nullptr) *spawn_exit_code = 64;
    return Error(Errc::invalid_argument,
                 "no command given (put it after \"--\")");
  }
  std::vector<std::string> argv_storage = options.argv;
  std::vector<std::string> env_storage = child_environment(options.env);
  std::vector<char*> argv = pointers(argv_storage);
  std::vector<char*> envp = pointers(env_storage);

  // The child starts with default dispositions and an empty signal mask,
  // whatever baton had installed.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : kForwarded) sigaddset(&defaults, sig);
  sigaddset(&defaults, SIGPIPE);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  // Block the forwarded signals across spawn + handler installation so that
  // none is lost between the two.
  sigset_t block, old_mask;
  sigemptyset(&block);
  for (int sig : kForwarded) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);

  pid_t pid = 0;
  int rc =
      posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    if (spawn_exit_code != nullptr) {
      *spawn_exit_code = (rc == ENOENT || rc == ENOTDIR) ? 127 : 126;
    }
    return Error(Errc::invalid_argument, "cannot run \"" + options.argv[0] +
                                             "\": " + std::strerror(rc));
  }

  SuperviseResult result;
  {
    SignalForwarding forwarding(pid);
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    for (;;) {
      if (auto status = try_reap(pid)) {
        result.exit_code = exit_code_from_wait_status(*status);
        return result;
      }
      if (options.stop != nullptr && options.stop->load()) {
        if (options.on_stop) options.on_stop();
        result.stopped = true;
        result.exit_code =
            exit_code_from_wait_status(stop_child(pid, options.grace));
        return result;
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }
}

}  // namespace baton::cli
