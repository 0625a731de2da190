// tests/cli/process.h — run programs as subprocesses for the CLI tests:
// capture exit code, stdout and stderr; start long-running ones and signal
// them.
#ifndef BATON_TESTS_CLI_PROCESS_H_
#define BATON_TESTS_CLI_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace baton::testing {

struct ProcessResult {
  int exit_code = -1;  // exit status, 128+N if killed by N, -1 if timed out
  std::string out;
  std::string err;
};

// A running subprocess whose stdout/stderr go to temporary files.
class Process {
 public:
  // Starts argv (argv[0] is a path or looked up in PATH) with the current
  // environment plus `env`.
  Process(const std::vector<std::string>& argv,
          const std::vector<std::pair<std::string, std::string>>& env = {});
  ~Process();  // kills (SIGKILL) and reaps if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  void signal(int sig);
  // Waits up to `timeout`; on timeout kills the process and reports -1.
  ProcessResult wait(
      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Output so far.
  std::string out() const;
  std::string err() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string out_path_;
  std::string err_path_;
};

// Runs to completion.
ProcessResult run(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& env = {},
    std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A free TCP port on 127.0.0.1 (bound and released; small race accepted).
int free_port();

// CLOCK_REALTIME now, in ns: the one clock the lease-deadline tests judge
// on (the commands under `baton run` write `date +%s%N`).
std::int64_t realtime_ns();
// The numbers in `file`, one per line (missing file: none).
std::vector<std::int64_t> timestamps(const std::string& file);
// True once something accepts TCP connections on 127.0.0.1:port.
bool wait_for_port(int port, std::chrono::milliseconds timeout);
// A fresh temporary directory (mkdtemp).
std::string make_temp_dir();

// Sleeps until CLOCK_REALTIME reaches `ns` (at once if it has).
void sleep_until_realtime(std::int64_t ns);

// A shell script for `sh -c`: appends a CLOCK_REALTIME timestamp to `file`
// every 50 ms; on SIGTERM appends one to `term` and exits 143 (its `sleep`
// is killed by the same SIGTERM, which goes to the whole process group).
std::string ticker_script(const std::string& file, const std::string& term);

// Runs `f` when the scope ends (also when an ASSERT returns early).
class Defer {
 public:
  explicit Defer(std::function<void()> f) : f_(std::move(f)) {}
  ~Defer() {
    if (f_) f_();
  }
  Defer(const Defer&) = delete;
  Defer& operator=(const Defer&) = delete;

 private:
  std::function<void()> f_;
};

// The whole file at `path` (empty if it cannot be read).
std::string slurp(const std::string& path);

}  // namespace baton::testing

#endif  // BATON_TESTS_CLI_PROCESS_H_
