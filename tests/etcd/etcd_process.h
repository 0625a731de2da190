// tests/etcd/etcd_process.h — a private etcd 3.4 cluster (Debian's
// etcd-server) for one test binary: 1 or 3 members on free loopback ports
// in a temp dir, each started with fork/exec and stopped by pid. Members
// use a 20 ms heartbeat and 200 ms election timeout, so a leader change
// takes well under a second and etcd's lease minimum is 1 s.
//
//   baton::testing::EtcdCluster c(3);
//   c.url()            // etcd://127.0.0.1:P1,127.0.0.1:P2,.../baton-test
//   c.kill(i); c.start(i); c.leader();
#ifndef BATON_TESTS_ETCD_ETCD_PROCESS_H_
#define BATON_TESTS_ETCD_ETCD_PROCESS_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"

namespace baton::testing {

class EtcdCluster {
 public:
  explicit EtcdCluster(int members = 1) {
    // Data on tmpfs when there is one: etcd fsyncs every write, which the
    // suites' thousands of writes would wait for on a shared disk (etcd
    // 3.4 has no flag to skip it). A member killed and restarted still
    // finds its data; only a machine crash would lose it.
    char tmpl[] = "/dev/shm/baton-etcd-XXXXXX";
    if (!std::filesystem::is_directory("/dev/shm")) {
      std::strcpy(tmpl, "/tmp/baton-etcd-XXXXXX");
    }
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    for (int i = 0; i < members; ++i) {
      Member m;
      m.name = "m" + std::to_string(i);
      m.client_port = free_port();
      m.peer_port = free_port();
      members_.push_back(m);
    }
    for (int i = 0; i < members; ++i) spawn(i, "new");
    for (int i = 0; i < members; ++i) wait_healthy(i);
  }
  ~EtcdCluster() {
    for (int i = 0; i < size(); ++i) kill(i);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  std::string endpoints() const {
    std::string s;
    for (const auto& m : members_) {
      if (!s.empty()) s += ",";
      s += "127.0.0.1:" + std::to_string(m.client_port);
    }
    return s;
  }
  std::string url(const std::string& prefix = "baton-test") const {
    return "etcd://" + endpoints() + "/" + prefix;
  }
  std::string member_url(int i,
                         const std::string& prefix = "baton-test") const {
    return "etcd://127.0.0.1:" + std::to_string(members_[i].client_port) + "/" +
           prefix;
  }
  pid_t pid(int i) const { return members_[i].pid; }
  std::uint16_t client_port(int i) const { return members_[i].client_port; }

  // SIGKILL member i (its data stays).
  void kill(int i) {
    Member& m = members_[i];
    if (m.pid <= 0) return;
    ::kill(m.pid, SIGCONT);
    ::kill(m.pid, SIGKILL);
    ::waitpid(m.pid, nullptr, 0);
    m.pid = -1;
  }
  // Starts member i again on its data.
  void start(int i) {
    if (members_[i].pid > 0) return;
    spawn(i, "existing");
    wait_healthy(i);
  }
  void pause(int i) { ::kill(members_[i].pid, SIGSTOP); }
  void resume(int i) { ::kill(members_[i].pid, SIGCONT); }

  // The member that reports itself leader (-1: none answered).
  int leader() const {
    for (int i = 0; i < size(); ++i) {
      if (members_[i].pid <= 0) continue;
      const std::string body = http_get(members_[i].client_port, "/metrics");
      if (body.find("\netcd_server_is_leader 1") != std::string::npos) {
        return i;
      }
    }
    return -1;
  }
  bool healthy(int i) const {
    return http_get(members_[i].client_port, "/health")
               .find("\"health\":\"true\"") != std::string::npos;
  }

  static std::uint16_t free_port() {
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

  std::string log_tail(int i) const {
    std::ifstream in(log_path(i));
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str();
    return all.size() > 2048 ? all.substr(all.size() - 2048) : all;
  }

 private:
  struct Member {
    std::string name;
    std::uint16_t client_port = 0;
    std::uint16_t peer_port = 0;
    pid_t pid = -1;
  };

  std::string log_path(int i) const {
    return dir_ + "/" + members_[i].name + ".log";
  }

  void spawn(int i, const std::string& state) {
    const Member& m = members_[i];
    std::string cluster;
    for (const auto& o : members_) {
      if (!cluster.empty()) cluster += ",";
      cluster += o.name + "=http://127.0.0.1:" + std::to_string(o.peer_port);
    }
    const std::string client =
        "http://127.0.0.1:" + std::to_string(m.client_port);
    const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
    std::vector<std::string> args = {"/usr/bin/etcd",
                                     "--name",
                                     m.name,
                                     "--data-dir",
                                     dir_ + "/" + m.name,
                                     "--listen-client-urls",
                                     client,
                                     "--advertise-client-urls",
                                     client,
                                     "--listen-peer-urls",
                                     peer,
                                     "--initial-advertise-peer-urls",
                                     peer,
                                     "--initial-cluster",
                                     cluster,
                                     "--initial-cluster-state",
                                     state,
                                     "--initial-cluster-token",
                                     "baton-test",
                                     "--heartbeat-interval",
                                     "20",
                                     "--election-timeout",
                                     "200",
                                     "--logger",
                                     "zap",
                                     "--log-level",
                                     "warn"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = log_path(i);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::close_range(3, ~0U, 0);
      const int in = ::open("/dev/null", O_RDONLY);
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (in >= 0) ::dup2(in, 0);
      if (out >= 0) {
        ::dup2(out, 1);
        ::dup2(out, 2);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    members_[i].pid = pid;
  }

  void wait_healthy(int i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto limit = t0 + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < limit) {
      if (healthy(i)) {
        std::fprintf(stderr,
                     "[etcd_process] etcd %s on port %u up in %lld ms\n",
                     members_[i].name.c_str(),
                     static_cast<unsigned>(members_[i].client_port),
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count()));
        return;
      }
      int status = 0;
      if (::waitpid(members_[i].pid, &status, WNOHANG) == members_[i].pid) {
        members_[i].pid = -1;
        throw std::runtime_error("etcd exited during start (status " +
                                 std::to_string(status) + "): " + log_tail(i));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("etcd did not report healthy within 60 s: " +
                             log_tail(i));
  }

  // A plain HTTP/1.0 GET on loopback (etcd serves /health and /metrics on
  // its client port); "" on any failure.
  static std::string http_get(std::uint16_t port, const std::string& path) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    std::string reply;
    const std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(req.size())) {
      const auto end =
          std::chrono::steady_clock::now() + std::chrono::seconds(2);
      char buf[8192];
      for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            end - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        reply.append(buf, static_cast<std::size_t>(n));
      }
    }
    ::close(fd);
    return reply;
  }

  std::string dir_;
  std::vector<Member> members_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_ETCD_ETCD_PROCESS_H_
