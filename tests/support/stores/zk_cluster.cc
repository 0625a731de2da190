// tests/support/stores/zk_cluster.cc — kind zookeeper: one private
// ZooKeeper 3.8 server (Debian package zookeeper, Java 17) in the given
// directory, on a free loopback port, behind per-slot TcpProxies like the
// other kinds (proxied.h).
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

// A four-letter word's answer from 127.0.0.1:port, read to EOF ("" if the
// server cannot be reached or does not answer in time).
std::string four_letter(std::uint16_t port, const char* word,
                        milliseconds timeout) {
  return loopback_request(word, port, timeout);
}

// One ZooKeeper server process (standalone).
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

  // Writes zoo.cfg for a free port. false + *error.
  bool configure(std::string* error) {
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
        << "clientPortAddress=127.0.0.1\n"
        << "admin.enableServer=false\n"
        << "4lw.commands.whitelist=ruok,srvr,stat\n"
        << "minSessionTimeout=" << kMinSession.count() << "\n"
        << "maxSessionTimeout=" << kMaxSession.count() << "\n"
        << "forceSync=yes\n";
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
  bool start(std::string* error) {
    std::vector<std::string> args = {
        kJava, "-cp", class_path_,
        "org.apache.zookeeper.server.quorum.QuorumPeerMain", dir_ + "/zoo.cfg"};
    const std::string log = dir_ + "/zookeeper.log";
    // Never outlives the thread that forked it (so restarts must come from
    // a thread that lives as long as the server should); stays up on
    // Ctrl-C, which the torture harness answers by finishing its run.
    pid_ = spawn_logged(args, log, /*ignore_sigint=*/true);
    if (pid_ < 0) {
      *error = std::string("zookeeper: fork: ") + std::strerror(errno);
      return false;
    }
    const auto until = steady_clock::now() + kZkReadyWithin;
    while (steady_clock::now() < until) {
      int st = 0;
      if (child_exited(pid_, &st)) {
        *error = "zookeeper exited at start (status " + std::to_string(st) +
                 "); see " + log + ": " + file_tail(log, 400);
        return false;
      }
      // `ruok` is answered as soon as the port listens; `srvr` says
      // "Mode: standalone" only once the database is loaded and the
      // server takes sessions.
      if (four_letter(port_, "ruok", milliseconds(500)) == "imok" &&
          four_letter(port_, "srvr", milliseconds(500)).find("Mode:") !=
              std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    kill9();
    *error = "zookeeper did not answer ruok/srvr on 127.0.0.1:" +
             std::to_string(port_) + " within " +
             format_duration(kZkReadyWithin) + "; see " + log;
    return false;
  }

  void kill9() { kill_child(pid_); }
  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }

 private:
  std::string dir_;
  std::string class_path_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

class ZkCluster : public Proxied {
 public:
  ZkCluster(const StoreOptions& o, const std::string& dir)
      : o_(o), server_(dir + "/zookeeper") {}
  ~ZkCluster() override {
    if (frozen_) ::kill(server_.pid(), SIGCONT);
    drop_proxies();
  }

  bool init(std::string* error) {
    if (o_.lease_ttl > kMaxSession) {
      *error = "zookeeper: a lease TTL above " + format_duration(kMaxSession) +
               " would outlast zoo.cfg's maxSessionTimeout";
      return false;
    }
    if (!server_.configure(error) || !server_.start(error)) return false;
    if (o_.proxies) {
      auto url_of = [this](const std::vector<std::string>& via) {
        return make_url(via.at(0));
      };
      if (!add_proxies(o_.slots, {{"127.0.0.1", server_.port()}}, url_of,
                       error)) {
        return false;
      }
    }
    return true;
  }

  std::string direct_url() const override {
    return make_url("127.0.0.1:" + std::to_string(server_.port()));
  }
  std::string pg_conninfo() const override { return ""; }
  int servers() const override { return 1; }
  void kill9(int) override { server_.kill9(); }
  bool restart(int, std::string* error) override {
    // Same port and data dir; a start that fails (e.g. the port not free
    // yet) is tried again.
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (server_.start(error)) return true;
      std::this_thread::sleep_for(milliseconds(250));
    }
    return false;
  }
  bool freeze(bool on, std::string* why) override {
    if (server_.pid() <= 0) {
      if (why != nullptr) *why = "zookeeper is not running";
      return false;
    }
    // Every thread of the JVM stops with the process.
    ::kill(server_.pid(), on ? SIGSTOP : SIGCONT);
    frozen_ = on;
    return true;
  }

 private:
  std::string make_url(const std::string& hostport) const {
    return "zookeeper://" + hostport + "/torture?session_timeout=" +
           format_duration(session_timeout_for(o_.lease_ttl));
  }

  StoreOptions o_;
  ZkServer server_;
  bool frozen_ = false;
};

}  // namespace

std::unique_ptr<StoreCluster> start_zookeeper(const StoreOptions& options,
                                              const std::string& dir,
                                              std::string* error) {
  return opened(std::make_unique<ZkCluster>(options, dir), error);
}

}  // namespace baton::testing
