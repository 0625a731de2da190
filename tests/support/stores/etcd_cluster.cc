// tests/support/stores/etcd_cluster.cc — kind etcd: a private 3-member
// etcd 3.4 cluster (Debian package etcd-server) in the given directory, on
// free loopback ports, each member behind per-slot TcpProxies like the
// other kinds (proxied.h); the URL lists all three, so clients fail over.
//
// Each member is /usr/bin/etcd (fork/exec, PR_SET_PDEATHSIG, its output in
// etcd/<name>.log), with a 20 ms heartbeat and 200 ms election timeout (a
// leader change well under a second; etcd's lease minimum is then 1 s);
// ready when GET /health on its client port says "true"; killed -9 by pid
// (one member at a time, the others keep a quorum) and restarted on the
// same ports and data dir; frozen with SIGSTOP / SIGCONT of every member.
// Data on disk with etcd's fsync of every write (durable across kill -9).
// The store (etcd://, src/stores/etcd) is reached by URL through the
// registry: nothing of it is compiled in here.
//
// Kind etcds: the same over TLS. Certificates are made at start
// (tests/server/test_certs.h) in a temp dir; each member's client port
// speaks TLS only and requires a client certificate its CA signed, health
// is read on a plain metrics port. etcd authentication is on: root, and a
// user `baton` whose only role is readwrite on the prefix "torture/"
// (docs/stores/etcd.md, "Security"); the URL names the user and a
// password_file (mode 0600) in the run directory, so it holds no secret.
// Through the proxies the URL still says 127.0.0.1, which the server's
// certificate names.
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "baton/duration.h"
#include "child_process.h"
#include "etcd_member.h"
#include "tests/server/test_certs.h"
#include "tests/support/stores/netns.h"
#include "tests/support/stores/proxied.h"

namespace baton::testing {
namespace {

using std::chrono::steady_clock;

constexpr const char* kEtcd = "/usr/bin/etcd";
constexpr int kMembers = 3;
constexpr milliseconds kEtcdReadyWithin{30000};

// GET /health on host:port: true if etcd says it is healthy.
bool healthy(const std::string& host, std::uint16_t port) {
  return loopback_http_get(port, "/health", host).find("\"health\":\"true\"") !=
         std::string::npos;
}

struct Member : EtcdMemberSpec {
  pid_t pid = -1;
};

class EtcdCluster : public Proxied {
 public:
  EtcdCluster(const StoreOptions& o, const std::string& dir)
      : o_(o), dir_(dir + "/etcd"), tls_on_(o.kind == "etcds") {}
  ~EtcdCluster() override {
    for (auto& m : members_) kill_child(m.pid);
    drop_proxies();
  }

  bool init(std::string* error) {
    if (::access(kEtcd, X_OK) != 0) {
      *error =
          std::string("etcd: no ") + kEtcd + " (Debian package etcd-server)";
      return false;
    }
    ::mkdir(dir_.c_str(), 0700);
    if (o_.member_namespaces) {
      if (tls_on_) {
        *error =
            "etcds: member namespaces are for etcd (the certificates "
            "name 127.0.0.1)";
        return false;
      }
      net_ = MemberNetwork::create(kMembers, error);
      if (!net_) return false;
    }
    if (tls_on_) {
      try {
        certs_ = std::make_unique<TestCertificates>();
      } catch (const std::exception& e) {
        *error = std::string("etcds: ") + e.what();
        return false;
      }
      tls_.cert = certs_->path("server.pem");
      tls_.key = certs_->path("server.key");
      tls_.ca = certs_->path("ca.pem");
    }
    // A port chosen free can be taken before etcd binds it (other tests
    // pick ports the same way): a member that exits at start makes the
    // whole cluster start again on new ports, with empty data dirs.
    for (int attempt = 0;; ++attempt) {
      if (start_members(error)) break;
      for (auto& m : members_) kill_child(m.pid);
      for (const auto& m : members_) {
        std::error_code ec;
        std::filesystem::remove_all(dir_ + "/" + m.name, ec);
      }
      members_.clear();
      if (attempt == 2 || error->find("exited at start") == std::string::npos) {
        return false;
      }
    }
    if (tls_on_ && !enable_auth(error)) return false;
    if (o_.proxies) {
      std::vector<std::pair<std::string, int>> hosts;
      for (const auto& m : members_) hosts.push_back({m.host, m.client_port});
      auto url_of = [this](const std::vector<std::string>& via) {
        return make_url(via);
      };
      if (!add_proxies(o_.slots, hosts, url_of, error)) return false;
    }
    return true;
  }

  std::string direct_url() const override {
    std::vector<std::string> eps;
    for (const auto& m : members_) {
      eps.push_back(m.host + ":" + std::to_string(m.client_port));
    }
    return make_url(eps);
  }
  std::string pg_conninfo() const override { return ""; }
  int servers() const override { return kMembers; }
  void kill9(int i) override {
    kill_child(members_[static_cast<std::size_t>(i) % members_.size()].pid);
  }
  bool restart(int i, std::string* error) override {
    const int k = i % kMembers;
    if (members_[static_cast<std::size_t>(k)].pid > 0) return true;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (spawn(k, "existing", error) && wait_ready(k, error)) return true;
      kill9(k);
      std::this_thread::sleep_for(milliseconds(250));
    }
    return false;
  }
  // The member whose status (the JSON gateway's POST
  // /v3/maintenance/status) names itself as the leader.
  int leader() const override {
    if (tls_on_) return -1;
    const std::regex member("\"member_id\":\"([0-9]+)\"");
    const std::regex leader_id("\"leader\":\"([0-9]+)\"");
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (members_[i].pid <= 0) continue;
      const std::string r = loopback_request(
          "POST /v3/maintenance/status HTTP/1.0\r\nContent-Type: "
          "application/json\r\nContent-Length: 2\r\n\r\n{}",
          static_cast<std::uint16_t>(members_[i].client_port),
          milliseconds(1000), members_[i].host);
      std::smatch a, b;
      if (std::regex_search(r, a, member) &&
          std::regex_search(r, b, leader_id) && a[1] == b[1]) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  bool pause_server(int i, bool on, std::string* why) override {
    const Member& m = members_[static_cast<std::size_t>(i) % members_.size()];
    if (m.pid <= 0) {
      if (why != nullptr) *why = "etcd member " + m.name + " is not running";
      return false;
    }
    ::kill(m.pid, on ? SIGSTOP : SIGCONT);
    return true;
  }
  bool cut_members(int i, int j, bool on, std::string* why) override {
    if (!net_) return StoreCluster::cut_members(i, j, on, why);
    return net_->cut(i % kMembers, j % kMembers, on, why);
  }
  std::string member_cuts() const override { return net_ ? net_->cuts() : ""; }
  bool freeze(bool on, std::string* why) override {
    bool any = false;
    for (auto& m : members_) {
      if (m.pid > 0) {
        ::kill(m.pid, on ? SIGSTOP : SIGCONT);
        any = true;
      }
    }
    if (!any && why != nullptr) *why = "no etcd member is running";
    return any;
  }

 private:
  // Members on free ports, started and healthy (false + *error).
  bool start_members(std::string* error) {
    for (int i = 0; i < kMembers; ++i) {
      Member m;
      m.name = "m" + std::to_string(i);
      m.client_port = free_loopback_port();
      m.peer_port = free_loopback_port();
      if (tls_on_) m.metrics_port = free_loopback_port();
      if (net_) m.host = net_->host(i);
      if (m.client_port == 0 || m.peer_port == 0) {
        *error = "etcd: no free loopback port";
        return false;
      }
      members_.push_back(m);
    }
    for (int i = 0; i < kMembers; ++i) {
      if (!spawn(i, "new", error)) return false;
    }
    for (int i = 0; i < kMembers; ++i) {
      if (!wait_ready(i, error)) return false;
    }
    return true;
  }

  std::string make_url(const std::vector<std::string>& eps) const {
    std::string s = tls_on_ ? "etcds://baton@" : "etcd://";
    for (std::size_t i = 0; i < eps.size(); ++i) {
      if (i > 0) s += ",";
      s += eps[i];
    }
    s += "/torture";
    if (tls_on_) {
      s += "?ca=" + tls_.ca + "&cert=" + certs_->path("client.pem") +
           "&key=" + certs_->path("client.key") +
           "&password_file=" + password_file();
    }
    return s;
  }

  std::string password_file() const { return dir_ + "/baton.password"; }

  // etcdctl against member 0 (TLS, the client certificate; as root once
  // auth is on); false + *error naming the command and its output.
  bool etcdctl(const std::vector<std::string>& args, const std::string& input,
               std::string* error) {
    std::vector<std::string> a = {
        "--endpoints",
        "https://127.0.0.1:" + std::to_string(members_[0].client_port),
        "--cacert",
        tls_.ca,
        "--cert",
        certs_->path("client.pem"),
        "--key",
        certs_->path("client.key"),
        "--dial-timeout",
        "5s",
        "--command-timeout",
        "10s"};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<std::string> env;
    if (auth_on_) env.push_back("ETCDCTL_USER=root:" + root_password_);
    std::string out;
    if (etcdctl_run(a, env, input, &out) != 0) {
      *error = "etcds: etcdctl " + args[0] + " " + args[1] + " failed: " + out;
      return false;
    }
    return true;
  }

  // Users root and baton (passwords random, baton's in password_file()),
  // the role baton (readwrite on "torture/"), then `auth enable`.
  bool enable_auth(std::string* error) {
    const std::string baton_pw = OwnerToken::random().to_string();
    root_password_ = OwnerToken::random().to_string();
    {
      std::ofstream f(password_file());
      f << baton_pw << "\n";
    }
    ::chmod(password_file().c_str(), 0600);
    const std::vector<std::pair<std::vector<std::string>, std::string>> steps =
        {{{"user", "add", "root", "--interactive=false"}, root_password_},
         {{"user", "grant-role", "root", "root"}, ""},
         {{"role", "add", "baton"}, ""},
         {{"role", "grant-permission", "baton", "--prefix=true", "readwrite",
           "torture/"},
          ""},
         {{"user", "add", "baton", "--interactive=false"}, baton_pw},
         {{"user", "grant-role", "baton", "baton"}, ""},
         {{"auth", "enable"}, ""}};
    for (const auto& [args, input] : steps) {
      if (!etcdctl(args, input.empty() ? "" : input + "\n", error)) {
        return false;
      }
    }
    auth_on_ = true;
    return true;
  }

  bool spawn(int i, const std::string& state, std::string* error) {
    const auto k = static_cast<std::size_t>(i);
    const Member& m = members_[k];
    std::vector<EtcdMemberSpec> specs(members_.begin(), members_.end());
    auto args = etcd_member_args(kEtcd, specs, k, dir_ + "/" + m.name, state,
                                 "baton-torture", tls_on_ ? &tls_ : nullptr);
    if (net_) {  // `ip netns exec` execs etcd: the pid stays the member's
      auto prefix = net_->exec_prefix(i);
      args.insert(args.begin(), prefix.begin(), prefix.end());
    }
    // Stays up on Ctrl-C, which the torture harness answers by finishing
    // its run.
    const pid_t pid = spawn_logged(args, dir_ + "/" + m.name + ".log",
                                   /*ignore_sigint=*/true);
    if (pid < 0) {
      *error = std::string("etcd: fork: ") + std::strerror(errno);
      return false;
    }
    members_[static_cast<std::size_t>(i)].pid = pid;
    return true;
  }

  bool wait_ready(int i, std::string* error) {
    Member& m = members_[static_cast<std::size_t>(i)];
    const auto until = steady_clock::now() + kEtcdReadyWithin;
    while (steady_clock::now() < until) {
      int st = 0;
      if (child_exited(m.pid, &st)) {
        *error = "etcd " + m.name + " exited at start (status " +
                 std::to_string(st) + "); see " + dir_ + "/" + m.name + ".log";
        return false;
      }
      if (healthy(m.host, tls_on_ ? m.metrics_port : m.client_port)) {
        return true;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    *error = "etcd " + m.name + " was not healthy within " +
             format_duration(kEtcdReadyWithin);
    return false;
  }

  StoreOptions o_;
  std::string dir_;
  bool tls_on_ = false;  // kind etcds
  std::unique_ptr<TestCertificates> certs_;
  EtcdMemberTls tls_;
  bool auth_on_ = false;
  std::string root_password_;
  // Declared before members_: destroyed after the members are killed.
  std::unique_ptr<MemberNetwork> net_;
  std::vector<Member> members_;
};

}  // namespace

std::unique_ptr<StoreCluster> start_etcd(const StoreOptions& options,
                                         const std::string& dir,
                                         std::string* error) {
  return opened(std::make_unique<EtcdCluster>(options, dir), error);
}

}  // namespace baton::testing
