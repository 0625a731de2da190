// tests/support/etcd_member.h — the command line of one member of a
// private etcd 3.4 cluster (Debian's etcd-server) on loopback, shared by
// the etcd tests' launcher and the torture harness: 20 ms heartbeat and
// 200 ms election timeout, so a leader change takes well under a second.
// With EtcdMemberTls the client port speaks TLS only and requires a client
// certificate its CA signed (peers stay plain-text on loopback), and a
// plain-text metrics port answers /health and /metrics. etcdctl_run() runs
// etcdctl (Debian's etcd-client) for the users, roles and `auth enable`
// of a test, a password on its stdin, never in its argv.
#ifndef BATON_TESTS_SUPPORT_ETCD_MEMBER_H_
#define BATON_TESTS_SUPPORT_ETCD_MEMBER_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace baton::testing {

struct EtcdMemberSpec {
  std::string name;  // unique in the cluster ("m0")
  // Its address: loopback, or its own network namespace's (netns.h).
  std::string host = "127.0.0.1";
  std::uint16_t client_port = 0;
  std::uint16_t peer_port = 0;
  std::uint16_t metrics_port = 0;  // with TLS: plain /health, /metrics
};

// TLS on the client port (PEM paths). The server's certificate must name
// 127.0.0.1 (tests/server/test_certs.h's server.pem does).
struct EtcdMemberTls {
  std::string cert, key, ca;  // --cert-file, --key-file, --trusted-ca-file
  // Also listen on 127.0.0.2 (the same port): an address the certificate
  // does not name, for host-name checks.
  bool second_address = false;
  // --auth-token-ttl in seconds (0: etcd's default, 300).
  int auth_token_ttl_s = 0;
};

// `binary`: /usr/bin/etcd; `data_dir`: the member's own; `state`: "new" or
// "existing"; `token`: the cluster's initial token; `tls`: nullptr for
// plain text.
inline std::vector<std::string> etcd_member_args(
    const std::string& binary, const std::vector<EtcdMemberSpec>& members,
    std::size_t i, const std::string& data_dir, const std::string& state,
    const std::string& token, const EtcdMemberTls* tls = nullptr) {
  std::string cluster;
  for (const auto& o : members) {
    if (!cluster.empty()) cluster += ",";
    cluster += o.name + "=http://" + o.host + ":" + std::to_string(o.peer_port);
  }
  const EtcdMemberSpec& m = members[i];
  const std::string scheme = tls != nullptr ? "https://" : "http://";
  const std::string client =
      scheme + m.host + ":" + std::to_string(m.client_port);
  const std::string peer =
      "http://" + m.host + ":" + std::to_string(m.peer_port);
  std::string listen = client;
  if (tls != nullptr && tls->second_address) {
    listen += "," + scheme + "127.0.0.2:" + std::to_string(m.client_port);
  }
  std::vector<std::string> args = {binary,   "--name",
                                   m.name,   "--data-dir",
                                   data_dir, "--listen-client-urls",
                                   listen,   "--advertise-client-urls",
                                   client,   "--listen-peer-urls",
                                   peer,     "--initial-advertise-peer-urls",
                                   peer,     "--initial-cluster",
                                   cluster,  "--initial-cluster-state",
                                   state,    "--initial-cluster-token",
                                   token,    "--heartbeat-interval",
                                   "20",     "--election-timeout",
                                   "200",    "--logger",
                                   "zap",    "--log-level",
                                   "warn"};
  if (m.metrics_port != 0) {
    args.push_back("--listen-metrics-urls");
    args.push_back("http://" + m.host + ":" + std::to_string(m.metrics_port));
  }
  if (tls != nullptr) {
    for (const std::string& a :
         {std::string("--cert-file"), tls->cert, std::string("--key-file"),
          tls->key, std::string("--trusted-ca-file"), tls->ca,
          std::string("--client-cert-auth")}) {
      args.push_back(a);
    }
    if (tls->auth_token_ttl_s > 0) {
      args.push_back("--auth-token-ttl");
      args.push_back(std::to_string(tls->auth_token_ttl_s));
    }
  }
  return args;
}

// Runs /usr/bin/etcdctl `args` (with `env` added to the environment, e.g.
// ETCDCTL_USER=root:<pw>, so that no secret is in argv), `input` on its
// stdin; waits at most `limit`. Returns its exit status (-1: it did not
// finish, killed) and its output (stdout and stderr) in *out.
inline int etcdctl_run(
    const std::vector<std::string>& args, const std::vector<std::string>& env,
    const std::string& input, std::string* out,
    std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) {
  int in[2], res[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return -1;
  if (::pipe2(res, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return -1;
  }
  std::vector<std::string> a = {"/usr/bin/etcdctl"};
  a.insert(a.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> e = env;
  e.push_back("ETCDCTL_API=3");
  e.push_back("PATH=/usr/bin:/bin");
  std::vector<char*> envp;
  for (auto& s : e) envp.push_back(s.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(in[0], 0);
    ::dup2(res[1], 1);
    ::dup2(res[1], 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(res[1]);
  if (pid > 0 && !input.empty()) {
    (void)!::write(in[1], input.data(), input.size());
  }
  ::close(in[1]);
  out->clear();
  const auto until = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (pid <= 0 || left.count() <= 0) break;
    pollfd p{res[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::read(res[0], buf, sizeof buf);
    if (n <= 0) break;
    out->append(buf, static_cast<std::size_t>(n));
  }
  ::close(res[0]);
  if (pid <= 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) {
    // Give it the rest of the limit to exit, then kill it.
    while (std::chrono::steady_clock::now() < until) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      ::usleep(10000);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_ETCD_MEMBER_H_
