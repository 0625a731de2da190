// tests/server/status_page_driver.h — the headless-browser side of the
// status page tests: finds a browser, and drives it over the DevTools
// protocol through status_page_cdp.py (python3-websocket), one command
// line in, one answer line out (status_page_cdp.py documents them).
//
// A test binary without a browser or python3-websocket exits 77 (ctest:
// SKIPPED, with the reason printed), unless BATON_REQUIRE_BROWSER is set
// (scripts/test, which installs them): then it fails.
#ifndef BATON_TESTS_SERVER_STATUS_PAGE_DRIVER_H_
#define BATON_TESTS_SERVER_STATUS_PAGE_DRIVER_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace baton::testing {

inline std::string g_browser;  // set by browser_test_main()

// The browser driver: one command line in, one answer line out.
class Driver {
 public:
  explicit Driver(const std::string& workdir) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      int log = ::open((workdir + "/driver.log").c_str(),
                       O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (log >= 0) ::dup2(log, 2);
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      ::execl("/usr/bin/python3", "python3", STATUS_PAGE_CDP, g_browser.c_str(),
              workdir.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Driver() {
    (void)send("quit", std::chrono::milliseconds(100));
    ::close(to_);
    ::close(from_);
    for (int i = 0; i < 100 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  // The next answer line ("ok ..." / "fail ..."), "" after `limit`.
  std::string line(std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "";
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char b[4096];
      ssize_t n = ::read(from_, b, sizeof b);
      if (n <= 0) return "";
      buf_.append(b, static_cast<std::size_t>(n));
    }
  }
  std::string send(
      const std::string& cmd,
      std::chrono::milliseconds limit = std::chrono::milliseconds(20'000)) {
    std::string l = cmd + "\n";
    if (::write(to_, l.data(), l.size()) < 0) return "";
    return line(limit);
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buf_;
};

inline bool ok(const std::string& answer) {
  return answer.rfind("ok ", 0) == 0;
}
inline std::string value(const std::string& answer) {
  auto sp = answer.find(' ');
  return sp == std::string::npos ? "" : answer.substr(sp + 1);
}

// main() of a browser test: exit 77 (SKIPPED) without a browser or
// python3-websocket, unless BATON_REQUIRE_BROWSER is set.
inline int browser_test_main(int argc, char** argv, const char* name) {
  std::string missing;
  for (const char* b : {"chromium-headless-shell", "chromium"}) {
    for (const char* dir : {"/usr/bin/", "/usr/local/bin/"}) {
      if (g_browser.empty() &&
          ::access((std::string(dir) + b).c_str(), X_OK) == 0) {
        g_browser = std::string(dir) + b;
      }
    }
  }
  if (const char* env = std::getenv("BATON_CHROMIUM")) {
    g_browser = ::access(env, X_OK) == 0 ? env : "";
  }
  if (g_browser.empty()) {
    missing =
        "no headless browser (apt-get install chromium-headless-shell, or "
        "BATON_CHROMIUM=<path>)";
  } else if (std::system("/usr/bin/python3 -c 'import websocket' "
                         ">/dev/null 2>&1") != 0) {
    missing = "no python3-websocket (apt-get install python3-websocket)";
  }
  if (!missing.empty()) {
    if (std::getenv("BATON_REQUIRE_BROWSER") != nullptr) {
      std::fprintf(stderr, "%s: FAILED: %s\n", name, missing.c_str());
      return 1;
    }
    std::printf("%s: SKIPPED: %s\n", name, missing.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SERVER_STATUS_PAGE_DRIVER_H_
