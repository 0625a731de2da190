// tests/support/stores/zk_cluster.cc — kind zookeeper: one private
// ZooKeeper 3.8 server (Debian package zookeeper, Java 17) in the given
// directory, on a free loopback port, behind per-slot TcpProxies like the
// other kinds (proxied.h); kind zookeeper3: an ensemble of three such
// servers (quorum and election ports of their own, a myid each), every
// client URL listing all three so that a client fails over between them.
//
// Started as QuorumPeerMain on a standalone zoo.cfg (fork/exec of the Java
// process itself, PR_SET_PDEATHSIG, its output in zookeeper/zookeeper.log);
// ready when it answers the four-letter word `ruok` with `imok` and `srvr`
// reports it serving; killed -9 by pid and restarted on the same port and
// data dir; frozen with SIGSTOP / SIGCONT of the Java process. The store
// itself (zookeeper://, src/stores/zookeeper) is reached by URL through the
// registry like every other store: nothing of it is compiled in here.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "baton/duration.h"
#include "child_process.h"
#include "tests/support/server_clock.h"
#include "tests/support/stores/netns.h"
#include "tests/support/stores/proxied.h"

namespace baton::testing {
namespace {

using std::chrono::steady_clock;

constexpr const char* kJava = "/usr/bin/java";
constexpr const char* kZkJar = "/usr/share/java/zookeeper.jar";
// ZooKeeper logs through SLF4J and logs nothing without a binding; with
// this one (Debian libslf4j-java, a dependency of zookeeper) on the class
// path it logs at INFO to stderr, i.e. to zookeeper.log: session
// expirations, snapshots and restarts for a post-mortem.
constexpr const char* kSlf4jSimple = "/usr/share/java/slf4j-simple.jar";
// zoo.cfg's session bounds; the store accepts session_timeout >= 1 s too.
constexpr milliseconds kMinSession{1000};
constexpr milliseconds kMaxSession{30000};
// A JVM start on a loaded 2-core machine took seconds; give it room.
constexpr milliseconds kZkReadyWithin{30000};

// The session timeout of every client's session, from the lease TTL.
//
// Leases do not end with the session: a zookeeper:// lease expires by
// ZooKeeper's clock (its node's mtime + TTL), and the store reclaims it
// then. The session only decides how long the ephemeral nodes of a client
// that died (a holder killed) or was cut off (a slot isolated, proxy
// faults, a holder paused) linger. So:
// - at least the TTL: a session that ended sooner would delete a holder's
//   node while the holder's safe deadline (send time + TTL) has not passed,
//   and another client could be granted the lock before the holder's lost
//   notice (the torture's checker 8b). The server's expiry counts from the last
//   request it heard, which is no earlier than the send time of the last
//   renewal, and rounds up to a tick (500 ms); 2 × TTL leaves a full TTL of
//   margin for scheduling on a loaded machine;
// - not much longer: the torture harness's faults last 0.2–3 × TTL
//   (pauses, isolation, a frozen store) or up to 2.5 s (blackholes), so
//   with 2 × TTL some of them
//   outlast the session and session expiry (the nodes gone, the client's
//   next session) is exercised as well; the store's default (10 s) would
//   never be reached in a 15 s run.
// Bounded by zoo.cfg's min/maxSessionTimeout (the server would negotiate
// it into that range anyway).
milliseconds session_timeout_for(milliseconds ttl) {
  return std::clamp(2 * ttl, kMinSession, kMaxSession);
}

// A four-letter word's answer from host:port, read to EOF ("" if the
// server cannot be reached or does not answer in time).
std::string four_letter(const std::string& host, std::uint16_t port,
                        const char* word, milliseconds timeout) {
  return loopback_request(word, port, timeout, host);
}

// One ZooKeeper server process (standalone).
// The members of an ensemble: "server.N=host:quorum:election" lines.
struct Ensemble {
  std::vector<std::string> hosts;
  std::vector<std::uint16_t> quorum_ports, election_ports;
};

class ZkServer {
 public:
  explicit ZkServer(std::string dir) : dir_(std::move(dir)) {}
  ~ZkServer() {
    // A throwaway server with its data in the run dir: no clean shutdown
    // (SIGTERM takes ~2 s per run).
    kill9();
  }
  ZkServer(const ZkServer&) = delete;
  ZkServer& operator=(const ZkServer&) = delete;

  // Writes zoo.cfg for a free port: standalone, or member `id` (1-based)
  // of `ensemble`. false + *error.
  bool configure(std::string* error, bool fsync, int id = 0,
                 const Ensemble* ensemble = nullptr) {
    for (const char* need : {kJava, kZkJar}) {
      if (::access(need, R_OK) != 0) {
        *error = std::string("zookeeper: no ") + need +
                 " (Debian package zookeeper, which brings Java 17)";
        return false;
      }
    }
    ::mkdir(dir_.c_str(), 0700);
    ::mkdir((dir_ + "/data").c_str(), 0700);
    port_ = free_loopback_port();
    if (port_ == 0) {
      *error = "zookeeper: no free loopback port";
      return false;
    }
    // Durable like the other kinds' servers: forceSync=yes (ZooKeeper's
    // default, written out) fsyncs the transaction log before a write is
    // acknowledged, so a kill -9 loses no acknowledged grant.
    std::ofstream cfg(dir_ + "/zoo.cfg");
    cfg << "tickTime=500\n"
        << "dataDir=" << dir_ << "/data\n"
        << "clientPort=" << port_ << "\n"
        << "clientPortAddress=" << host_ << "\n"
        << "admin.enableServer=false\n"
        << "4lw.commands.whitelist=ruok,srvr,stat\n"
        << "minSessionTimeout=" << kMinSession.count() << "\n"
        << "maxSessionTimeout=" << kMaxSession.count() << "\n"
        << "forceSync=" << (fsync ? "yes" : "no") << "\n";
    if (ensemble != nullptr) {
      // Ticks of 500 ms: a follower has 5 s to join and 2.5 s of silence
      // before the leader drops it.
      cfg << "initLimit=10\nsyncLimit=5\n";
      for (std::size_t i = 0; i < ensemble->quorum_ports.size(); ++i) {
        cfg << "server." << i + 1 << "=" << ensemble->hosts[i] << ":"
            << ensemble->quorum_ports[i] << ":" << ensemble->election_ports[i]
            << "\n";
      }
      std::ofstream myid(dir_ + "/data/myid");
      myid << id << "\n";
      if (!myid) {
        *error = "zookeeper: cannot write " + dir_ + "/data/myid";
        return false;
      }
    }
    cfg.close();
    // The logger's settings, read from the class path (dir_).
    std::ofstream logcfg(dir_ + "/simplelogger.properties");
    logcfg << "org.slf4j.simpleLogger.defaultLogLevel=info\n"
           << "org.slf4j.simpleLogger.showDateTime=true\n"
           << "org.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS\n";
    logcfg.close();
    if (!cfg || !logcfg) {
      *error = "zookeeper: cannot write the configuration in " + dir_;
      return false;
    }
    class_path_ = dir_ + ":" + kZkJar;
    if (::access(kSlf4jSimple, R_OK) == 0) {
      class_path_ += std::string(":") + kSlf4jSimple;
    }
    return true;
  }

  // Starts the Java process and waits until it serves. false + *error (the
  // process is killed then).
  bool start(std::string* error) { return spawn(error) && ready(error); }

  // Starts the Java process (an ensemble's members are all started before
  // any of them can serve). false + *error.
  bool spawn(std::string* error) {
    std::vector<std::string> args = {
        kJava, "-cp", class_path_,
        "org.apache.zookeeper.server.quorum.QuorumPeerMain", dir_ + "/zoo.cfg"};
    // In a network namespace: `ip netns exec` execs java, same pid.
    args.insert(args.begin(), exec_prefix_.begin(), exec_prefix_.end());
    const std::string log = dir_ + "/zookeeper.log";
    // Never outlives the thread that forked it (so restarts must come from
    // a thread that lives as long as the server should); stays up on
    // Ctrl-C, which the torture harness answers by finishing its run.
    std::vector<std::pair<std::string, std::string>> env;
    // The wall clock only (an NTP or operator step): the JVM's monotonic
    // clock, which ZooKeeper's session and election timers read, never
    // steps on a real machine.
    if (clock_ != nullptr) env = clock_->env();
    pid_ = spawn_logged(args, log, /*ignore_sigint=*/true, env);
    if (pid_ < 0) {
      *error = std::string("zookeeper: fork: ") + std::strerror(errno);
      return false;
    }
    return true;
  }

  // Waits until the server serves (standalone, leader or follower). false
  // + *error (the process is killed then).
  bool ready(std::string* error, milliseconds within = kZkReadyWithin) {
    const std::string log = dir_ + "/zookeeper.log";
    const auto until = steady_clock::now() + within;
    while (steady_clock::now() < until) {
      int st = 0;
      if (child_exited(pid_, &st)) {
        *error = "zookeeper exited at start (status " + std::to_string(st) +
                 "); see " + log + ": " + file_tail(log, 400);
        return false;
      }
      // `ruok` is answered as soon as the port listens; `srvr` says
      // "Mode: standalone" (or leader / follower in an ensemble) only once
      // the database is loaded and the server takes sessions.
      if (four_letter(host_, port_, "ruok", milliseconds(500)) == "imok" &&
          four_letter(host_, port_, "srvr", milliseconds(500)).find("Mode:") !=
              std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    kill9();
    *error = "zookeeper did not answer ruok/srvr on " + host_ + ":" +
             std::to_string(port_) + " within " + format_duration(within) +
             "; see " + log;
    return false;
  }

  // Runs the server with its wall clock under `path`'s offset
  // (server_clock.h; zero now). false if the library is missing.
  bool fake_clock(const std::string& path) {
    clock_ = std::make_unique<ServerClock>(path);
    if (!clock_->ok()) clock_.reset();
    return clock_ != nullptr;
  }
  bool set_clock(milliseconds offset) {
    return clock_ != nullptr && clock_->step(offset);
  }

  void kill9() { kill_child(pid_); }
  // Whether `srvr` says this member leads its ensemble.
  bool leads() const {
    return four_letter(host_, port_, "srvr", milliseconds(500))
               .find("Mode: leader") != std::string::npos;
  }
  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }
  // Serve on `host` inside the network namespace `exec_prefix` enters
  // (netns.h); before configure().
  void set_network(std::string host, std::vector<std::string> exec_prefix) {
    host_ = std::move(host);
    exec_prefix_ = std::move(exec_prefix);
  }

 private:
  std::string host_ = "127.0.0.1";
  std::vector<std::string> exec_prefix_;
  std::string dir_;
  std::string class_path_;
  std::unique_ptr<ServerClock> clock_;  // null: the real clock
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

class ZkCluster : public Proxied {
 public:
  // `members`: 1 (standalone) or 3 (an ensemble).
  ZkCluster(const StoreOptions& o, const std::string& dir, int members)
      : o_(o), dir_(dir) {
    for (int i = 0; i < members; ++i) {
      servers_.push_back(std::make_unique<ZkServer>(
          members == 1 ? dir + "/zookeeper"
                       : dir + "/zookeeper" + std::to_string(i + 1)));
    }
  }
  ~ZkCluster() override {
    for (const auto& s : servers_) {
      if (frozen_) ::kill(s->pid(), SIGCONT);
    }
    drop_proxies();
  }

  bool init(std::string* error) {
    if (o_.lease_ttl > kMaxSession) {
      *error = "zookeeper: a lease TTL above " + format_duration(kMaxSession) +
               " would outlast zoo.cfg's maxSessionTimeout";
      return false;
    }
    if (o_.server_clocks) {
      for (std::size_t i = 0; i < servers_.size(); ++i) {
        if (!servers_[i]->fake_clock(dir_ + "/zk-clock-" + std::to_string(i))) {
          *error =
              "zookeeper: server clocks need libbaton_clockshift.so (built "
              "with the tests)";
          return false;
        }
      }
    }
    if (servers_.size() == 1) {
      if (!servers_[0]->configure(error, o_.fsync) ||
          !servers_[0]->start(error)) {
        return false;
      }
    } else {
      if (o_.member_namespaces) {
        net_ = MemberNetwork::create(static_cast<int>(servers_.size()), error);
        if (!net_) return false;
        for (std::size_t i = 0; i < servers_.size(); ++i) {
          const int k = static_cast<int>(i);
          servers_[i]->set_network(net_->host(k), net_->exec_prefix(k));
        }
      }
      Ensemble e;
      for (std::size_t i = 0; i < servers_.size(); ++i) {
        e.hosts.push_back(servers_[i]->host());
        e.quorum_ports.push_back(free_loopback_port());
        e.election_ports.push_back(free_loopback_port());
      }
      for (std::size_t i = 0; i < servers_.size(); ++i) {
        if (!servers_[i]->configure(error, o_.fsync, static_cast<int>(i + 1),
                                    &e) ||
            !servers_[i]->spawn(error)) {
          return false;
        }
      }
      // Three JVMs start, then elect a leader: on a loaded 2-core machine
      // that took over 30 s.
      for (const auto& s : servers_) {
        if (!s->ready(error, 3 * kZkReadyWithin)) return false;
      }
    }
    if (o_.proxies) {
      std::vector<std::pair<std::string, int>> hosts;
      for (const auto& s : servers_) hosts.push_back({s->host(), s->port()});
      auto url_of = [this](const std::vector<std::string>& via) {
        return make_url(via);
      };
      if (!add_proxies(o_.slots, hosts, url_of, error)) return false;
    }
    return true;
  }

  std::string direct_url() const override {
    std::vector<std::string> direct;
    for (const auto& s : servers_) {
      direct.push_back(s->host() + ":" + std::to_string(s->port()));
    }
    return make_url(direct);
  }
  std::string pg_conninfo() const override { return ""; }
  int servers() const override { return static_cast<int>(servers_.size()); }
  void kill9(int i) override { server(i).kill9(); }
  bool restart(int i, std::string* error) override {
    // Same port and data dir; a start that fails (e.g. the port not free
    // yet) is tried again.
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (server(i).start(error)) return true;
      std::this_thread::sleep_for(milliseconds(250));
    }
    return false;
  }
  // The member whose `srvr` says "Mode: leader" (-1 standalone).
  int leader() const override {
    if (servers_.size() < 2) return -1;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (servers_[i]->pid() > 0 && servers_[i]->leads()) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  bool pause_server(int i, bool on, std::string* why) override {
    const pid_t pid = server(i).pid();
    if (pid <= 0) {
      if (why != nullptr) *why = "that zookeeper server is not running";
      return false;
    }
    ::kill(pid, on ? SIGSTOP : SIGCONT);
    return true;
  }
  bool step_server_clock(int i, milliseconds offset,
                         std::string* why) override {
    if (!server(i).set_clock(offset)) {
      if (why != nullptr) *why = "the servers' clocks are not stepped";
      return false;
    }
    return true;
  }
  bool cut_members(int i, int j, bool on, std::string* why) override {
    if (!net_) return StoreCluster::cut_members(i, j, on, why);
    return net_->cut(i, j, on, why);
  }
  std::string member_cuts() const override { return net_ ? net_->cuts() : ""; }
  bool freeze(bool on, std::string* why) override {
    for (const auto& s : servers_) {
      if (s->pid() <= 0) {
        if (why != nullptr) *why = "a zookeeper server is not running";
        return false;
      }
    }
    // Every thread of a JVM stops with its process.
    for (const auto& s : servers_) ::kill(s->pid(), on ? SIGSTOP : SIGCONT);
    frozen_ = on;
    return true;
  }

 private:
  ZkServer& server(int i) const {
    return *servers_[static_cast<std::size_t>(i) % servers_.size()];
  }
  std::string make_url(const std::vector<std::string>& hostports) const {
    std::string hosts;
    for (const std::string& h : hostports) {
      hosts += (hosts.empty() ? "" : ",") + h;
    }
    return "zookeeper://" + hosts + "/torture?session_timeout=" +
           format_duration(session_timeout_for(o_.lease_ttl));
  }

  StoreOptions o_;
  std::string dir_;
  // Declared before servers_: destroyed after the servers are killed.
  std::unique_ptr<MemberNetwork> net_;
  std::vector<std::unique_ptr<ZkServer>> servers_;
  bool frozen_ = false;
};

}  // namespace

std::unique_ptr<StoreCluster> start_zookeeper(const StoreOptions& options,
                                              const std::string& dir,
                                              std::string* error) {
  return opened(std::make_unique<ZkCluster>(
                    options, dir, options.kind == "zookeeper3" ? 3 : 1),
                error);
}

}  // namespace baton::testing
