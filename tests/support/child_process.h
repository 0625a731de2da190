// tests/support/child_process.h — the pieces every private-server launcher
// of the tests and the torture harness shares: a free loopback port, a
// server process started with fork/exec and its output in a log file,
// stopped by pid, the log's tail for error messages, and a request on a
// loopback socket (etcd's HTTP endpoints, ZooKeeper's four-letter words).
//
// Header-only, POSIX; every wait is bounded.
#ifndef BATON_TESTS_SUPPORT_CHILD_PROCESS_H_
#define BATON_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace baton::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (bound, then closed).
inline std::uint16_t free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// The last `bytes` of a file ("" if it cannot be read).
inline std::string file_tail(const std::string& path,
                             std::size_t bytes = 2048) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

// Starts `args` (args[0] an absolute path) with stdin from /dev/null and
// stdout and stderr appended to `log`. The child never outlives the thread
// that forked it (PR_SET_PDEATHSIG, checked against a parent already gone)
// and holds none of the parent's other descriptors (a TcpProxy socket kept
// open in a server would not be reset by cut_all()). `ignore_sigint`: the
// child ignores SIGINT (the torture harness finishes its run on Ctrl-C, so
// its servers must stay up; a JVM leaves an ignored SIGINT ignored). `env`:
// variables set in the child (e.g. libfaketime's).
// Returns the pid, or -1 (errno: fork's).
inline pid_t spawn_logged(
    const std::vector<std::string>& args, const std::string& log,
    bool ignore_sigint = false,
    const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  if (ignore_sigint) ::signal(SIGINT, SIG_IGN);
  ::close_range(3, ~0U, 0);
  const int in = ::open("/dev/null", O_RDONLY);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (in >= 0) ::dup2(in, 0);
  if (out >= 0) {
    ::dup2(out, 1);
    ::dup2(out, 2);
  }
  for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

// SIGKILL (after SIGCONT, in case it was stopped) and reap; pid = -1.
inline void kill_child(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGCONT);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  pid = -1;
}

// SIGTERM (after SIGCONT), then SIGKILL if it still runs `grace` later;
// reaps it; pid = -1.
inline void stop_child(pid_t& pid, std::chrono::milliseconds grace) {
  if (pid <= 0) return;
  ::kill(pid, SIGCONT);
  ::kill(pid, SIGTERM);
  const auto limit = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < limit) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill_child(pid);
}

// True (and pid = -1, *status set) if the child has exited; never blocks.
inline bool child_exited(pid_t& pid, int* status) {
  if (pid <= 0) return true;
  if (::waitpid(pid, status, WNOHANG) != pid) return false;
  pid = -1;
  return true;
}

// Sends `request` to `host` (127.0.0.1, or a test namespace's address):`port`
// and reads until the server closes
// the connection or `limit` passes: the reply, "" if none (ZooKeeper's
// four-letter words, plain HTTP/1.0).
inline std::string loopback_request(const std::string& request,
                                    std::uint16_t port,
                                    std::chrono::milliseconds limit,
                                    const std::string& host = "127.0.0.1") {
  const auto until = std::chrono::steady_clock::now() + limit;
  const int fd =
      ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  auto ready = [&](short events) {  // false once `limit` passed
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    return ::poll(&p, 1, static_cast<int>(left.count())) > 0;
  };
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    return "";
  }
  a.sin_port = htons(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (!ok && errno == EINPROGRESS && ready(POLLOUT)) {
    int err = 0;
    socklen_t len = sizeof err;
    ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
  }
  std::size_t sent = 0;
  while (ok && sent < request.size() && ready(POLLOUT)) {
    const ssize_t n =
        ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (errno != EAGAIN && errno != EINTR) {
      ok = false;
    }
  }
  std::string reply;
  while (ok && sent == request.size() && ready(POLLIN)) {
    char buf[8192];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      reply.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      break;
    }
  }
  ::close(fd);
  return reply;
}

// A plain HTTP/1.0 GET of `path` on 127.0.0.1:`port`, at most 2 s: the
// whole reply (headers and body), "" on any failure.
inline std::string loopback_http_get(std::uint16_t port,
                                     const std::string& path,
                                     const std::string& host = "127.0.0.1") {
  return loopback_request("GET " + path + " HTTP/1.0\r\n\r\n", port,
                          std::chrono::seconds(2), host);
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_CHILD_PROCESS_H_
