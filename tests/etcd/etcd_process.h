// tests/etcd/etcd_process.h — a private etcd 3.4 cluster (Debian's
// etcd-server) for one test binary: 1 or 3 members on free loopback ports
// in a temp dir, each started with fork/exec and stopped by pid. Members
// use a 20 ms heartbeat and 200 ms election timeout, so a leader change
// takes well under a second and etcd's lease minimum is 1 s.
//
//   baton::testing::EtcdCluster c(3);
//   c.url()            // etcd://127.0.0.1:P1,127.0.0.1:P2,.../baton-test
//   c.kill(i); c.start(i); c.leader();
//
// With EtcdClusterTls the client ports speak TLS only with client
// certificates (url() is then etcds://...?ca=&cert=&key=), health is read
// on a plain metrics port, and etcdctl() administers it (users, roles,
// `auth enable`; root's password from set_root_password(), passed in the
// environment).
#ifndef BATON_TESTS_ETCD_ETCD_PROCESS_H_
#define BATON_TESTS_ETCD_ETCD_PROCESS_H_

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "child_process.h"
#include "etcd_member.h"

namespace baton::testing {

// TLS on every member's client port, and the client's side of it.
struct EtcdClusterTls {
  EtcdMemberTls server;                 // the server's certificate, key and CA
  std::string client_cert, client_key;  // a certificate the CA signed
};

class EtcdCluster {
 public:
  explicit EtcdCluster(int members = 1,
                       std::optional<EtcdClusterTls> tls = std::nullopt)
      : tls_(std::move(tls)) {
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
      if (tls_) m.metrics_port = free_port();
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
    return scheme() + endpoints() + "/" + prefix + tls_query("?");
  }
  std::string member_url(int i,
                         const std::string& prefix = "baton-test") const {
    return scheme() + "127.0.0.1:" + std::to_string(members_[i].client_port) +
           "/" + prefix + tls_query("?");
  }
  // "<lead>ca=...&cert=...&key=..." with TLS, "" without.
  std::string tls_query(const std::string& lead) const {
    if (!tls_) return "";
    return lead + "ca=" + tls_->server.ca + "&cert=" + tls_->client_cert +
           "&key=" + tls_->client_key;
  }

  // Runs etcdctl against member 0 with the client certificate, as root
  // once set_root_password() was called; `input` on its stdin (a new
  // user's password). Returns its exit status; *out its output.
  int etcdctl(const std::vector<std::string>& args,
              const std::string& input = "", std::string* out = nullptr) const {
    std::vector<std::string> a = {
        "--endpoints",
        scheme() == "etcds://"
            ? "https://127.0.0.1:" + std::to_string(members_[0].client_port)
            : "http://127.0.0.1:" + std::to_string(members_[0].client_port),
        "--dial-timeout",
        "5s",
        "--command-timeout",
        "10s"};
    if (tls_) {
      for (const std::string& x :
           {std::string("--cacert"), tls_->server.ca, std::string("--cert"),
            tls_->client_cert, std::string("--key"), tls_->client_key}) {
        a.push_back(x);
      }
    }
    a.insert(a.end(), args.begin(), args.end());
    std::vector<std::string> env;
    if (!root_password_.empty())
      env.push_back("ETCDCTL_USER=root:" + root_password_);
    std::string o;
    const int st = etcdctl_run(a, env, input, &o);
    if (out != nullptr) *out = o;
    return st;
  }
  // etcdctl() as root from now on (after `auth enable`).
  void set_root_password(const std::string& pw) { root_password_ = pw; }
  pid_t pid(int i) const { return members_[i].pid; }
  std::uint16_t client_port(int i) const { return members_[i].client_port; }

  // SIGKILL member i (its data stays).
  void kill(int i) { kill_child(members_[i].pid); }
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
      const std::string body = loopback_http_get(http_port(i), "/metrics");
      if (body.find("\netcd_server_is_leader 1") != std::string::npos) {
        return i;
      }
    }
    return -1;
  }
  bool healthy(int i) const {
    return loopback_http_get(http_port(i), "/health")
               .find("\"health\":\"true\"") != std::string::npos;
  }

  static std::uint16_t free_port() { return free_loopback_port(); }

  std::string log_tail(int i) const { return file_tail(log_path(i)); }

 private:
  struct Member : EtcdMemberSpec {
    pid_t pid = -1;
  };

  std::string scheme() const { return tls_ ? "etcds://" : "etcd://"; }
  // Where plain HTTP /health and /metrics answer.
  std::uint16_t http_port(int i) const {
    return tls_ ? members_[i].metrics_port : members_[i].client_port;
  }

  std::string log_path(int i) const {
    return dir_ + "/" + members_[i].name + ".log";
  }

  void spawn(int i, const std::string& state) {
    std::vector<EtcdMemberSpec> specs(members_.begin(), members_.end());
    const auto args =
        etcd_member_args("/usr/bin/etcd", specs, static_cast<std::size_t>(i),
                         dir_ + "/" + members_[i].name, state, "baton-test",
                         tls_ ? &tls_->server : nullptr);
    const pid_t pid = spawn_logged(args, log_path(i));
    if (pid < 0) throw std::runtime_error("fork failed");
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
      if (child_exited(members_[i].pid, &status)) {
        throw std::runtime_error("etcd exited during start (status " +
                                 std::to_string(status) + "): " + log_tail(i));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("etcd did not report healthy within 60 s: " +
                             log_tail(i));
  }

  std::optional<EtcdClusterTls> tls_;
  std::string root_password_;
  std::string dir_;
  std::vector<Member> members_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_ETCD_ETCD_PROCESS_H_
