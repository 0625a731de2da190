// tests/server/batond_process.h — starts a real batond on a free loopback
// port in a temporary directory, and stops it by pid.
#ifndef BATON_TESTS_SERVER_BATOND_PROCESS_H_
#define BATON_TESTS_SERVER_BATOND_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace baton::testing {

class BatondProcess {
 public:
  // `dir`: data dir parent ("" = a fresh temp dir). Extra flags appended.
  // keep_output: batond's log lines after its ready line are kept in
  // <dir>/batond.out (output()); otherwise they are discarded.
  explicit BatondProcess(std::string dir = "",
                         std::vector<std::string> extra = {},
                         bool keep_output = false)
      : extra_(std::move(extra)), keep_output_(keep_output) {
    if (dir.empty()) {
      char tmpl[] = "/tmp/batond-test-XXXXXX";
      dir = ::mkdtemp(tmpl);
      owns_dir_ = true;
    }
    dir_ = dir;
    start();
  }
  ~BatondProcess() {
    stop();
    if (owns_dir_) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  BatondProcess(const BatondProcess&) = delete;
  BatondProcess& operator=(const BatondProcess&) = delete;

  // Starts batond (on `port_` again after a restart, else a free port).
  void start() {
    if (!try_start()) {
      throw std::runtime_error("batond did not start: " + startup_output_);
    }
  }
  // Like start(), but returns false if batond exited instead of becoming
  // ready (exit_status() and startup_output() then tell how).
  bool try_start() {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe");
    std::vector<std::string> args = {
        BATOND_PATH,  "--listen",     "127.0.0.1:" + std::to_string(port_),
        "--data-dir", dir_ + "/data", "--log-level",
        "warn"};
    // BATOND_TEST_ARGS: extra flags for every test server (e.g. to run the
    // conformance suite under "--fsync always"); the test's own come last.
    if (const char* env = std::getenv("BATOND_TEST_ARGS")) {
      std::string word;
      for (const char* p = env;; ++p) {
        if (*p == ' ' || *p == '\0') {
          if (!word.empty()) args.push_back(word);
          word.clear();
          if (*p == '\0') break;
        } else {
          word += *p;
        }
      }
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      int log = ::open((dir_ + "/batond.log").c_str(),
                       O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (log >= 0) ::dup2(log, 2);
      ::close(out[0]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    // Log lines (spdlog writes to stdout) may come before the ready line.
    startup_output_.clear();
    std::string line;
    char c;
    bool ready = false;
    while (::read(out[0], &c, 1) == 1) {
      if (c != '\n') {
        line += c;
      } else if (line.rfind("batond ready ", 0) == 0) {
        ready = true;
        break;
      } else {
        startup_output_ += line + "\n";
        line.clear();
      }
    }
    if (ready && keep_output_) {
      // Drains batond's stdout until it exits (joined in stop()).
      const int fd = out[0];
      const std::string path = dir_ + "/batond.out";
      drain_ = std::thread([fd, path] {
        int f = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
        char buf[4096];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0) {
          if (f >= 0 && ::write(f, buf, static_cast<std::size_t>(n)) < 0) break;
        }
        if (f >= 0) ::close(f);
        ::close(fd);
      });
    } else {
      ::close(out[0]);
    }
    auto at = line.find("port=");
    if (!ready || at == std::string::npos) {
      startup_output_ += line;
      stop();
      return false;
    }
    port_ = static_cast<std::uint16_t>(std::stoi(line.substr(at + 5)));
    auto m_at = line.find(" metrics_port=");
    metrics_port_ =
        m_at == std::string::npos
            ? 0
            : static_cast<std::uint16_t>(std::stoi(line.substr(m_at + 14)));
    auto tls_at = line.find(" tls_port=");
    tls_port_ =
        tls_at == std::string::npos
            ? 0
            : static_cast<std::uint16_t>(std::stoi(line.substr(tls_at + 10)));
    return true;
  }
  void kill9() { signal_and_wait(SIGKILL); }
  void stop() { signal_and_wait(SIGTERM); }
  // SIGSTOP / SIGCONT: the process keeps its sockets but runs nothing.
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }
  pid_t pid() const { return pid_; }
  // A "<key>: <n> kB" line of /proc/<pid>/status (VmRSS, VmHWM) in bytes;
  // -1 if missing.
  long long proc_status_bytes(const std::string& key) const {
    FILE* f =
        std::fopen(("/proc/" + std::to_string(pid_) + "/status").c_str(), "r");
    if (f == nullptr) return -1;
    char line[256];
    long long out = -1;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      std::string l(line);
      if (l.rfind(key + ":", 0) == 0) {
        out = std::stoll(l.substr(key.size() + 1)) * 1024;
        break;
      }
    }
    std::fclose(f);
    return out;
  }

  // The flags the next start() appends (after BATOND_TEST_ARGS).
  void set_extra(std::vector<std::string> extra) { extra_ = std::move(extra); }
  // What the last start printed before its ready line (or before it
  // exited): log lines at the --log-level given (warn unless overridden).
  const std::string& startup_output() const { return startup_output_; }
  // waitpid() status of the last process stopped (or that exited).
  int exit_status() const { return status_; }
  std::uint16_t port() const { return port_; }
  // The /metrics listener's port (0 without --metrics-listen).
  std::uint16_t metrics_port() const { return metrics_port_; }
  // The TLS listener's port (0 without --tls-listen).
  std::uint16_t tls_port() const { return tls_port_; }
  const std::string& dir() const { return dir_; }
  // batond's log lines after its ready line (keep_output only).
  std::string output() const {
    std::string out;
    FILE* f = std::fopen((dir_ + "/batond.out").c_str(), "r");
    if (f == nullptr) return out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
    return out;
  }
  std::string url() const {
    return "baton://127.0.0.1:" + std::to_string(port_);
  }

 private:
  void signal_and_wait(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    status_ = 0;
    ::waitpid(pid_, &status_, 0);
    pid_ = -1;
    if (drain_.joinable()) drain_.join();
  }
  std::vector<std::string> extra_;
  bool keep_output_ = false;
  std::thread drain_;  // keep_output_: copies stdout to batond.out
  std::string dir_;
  bool owns_dir_ = false;
  pid_t pid_ = -1;
  int status_ = 0;
  std::string startup_output_;
  std::uint16_t port_ = 0, tls_port_ = 0, metrics_port_ = 0;
};

// Runs a shell command, returns its stdout.
inline std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SERVER_BATOND_PROCESS_H_
