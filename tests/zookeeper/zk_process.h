// tests/zookeeper/zk_process.h — a private ZooKeeper 3.8 server for tests:
// standalone, on a free loopback port, in its own temp dir (zoo.cfg, data,
// the JVM's output in zk.log), stopped by pid (never by name).
//
//   ZkProcess zk;                       // started; throws if it cannot be
//   Client::open(zk.url());             // "zookeeper://127.0.0.1:P/baton-test
//                                       //  ?session_timeout=4s"
//   zk.four_letter("wchp");             // the server's watches by path
//   zk.restart();                       // same port, same data dir
//
// tickTime is 500 ms, so sessions of 1–30 s are accepted; every write is
// fsynced unless Options::force_sync is false. The JVM (/usr/bin/java with
// Debian's /usr/share/java/zookeeper.jar) gets PR_SET_PDEATHSIG SIGKILL: it
// dies with the *thread* that started it, so call start()/restart() from a
// thread that outlives the server (the test's main thread).
//
// Thread safety: none; one thread drives a ZkProcess. four_letter() and
// ruok() may be called from any thread.
#ifndef BATON_TESTS_ZOOKEEPER_ZK_PROCESS_H_
#define BATON_TESTS_ZOOKEEPER_ZK_PROCESS_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "baton/store_descriptor.h"
#include "child_process.h"

namespace baton::testing {

class ZkProcess {
 public:
  struct Options {
    // forceSync=yes: every transaction is fsynced before it is answered
    // (needed for restart tests); no is faster and loses the tail on a
    // kill -9.
    bool force_sync = true;
    // Extra JVM arguments ("-Dzookeeper.X=Y": server system properties).
    std::vector<std::string> jvm_flags;
  };

  ZkProcess() : ZkProcess(Options{}) {}
  explicit ZkProcess(Options options) : options_(options) {
    char tmpl[] = "/tmp/baton-zk-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/data");
    port_ = free_port();
    write_config();
    start();
  }
  ~ZkProcess() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ZkProcess(const ZkProcess&) = delete;
  ZkProcess& operator=(const ZkProcess&) = delete;

  // Starts the JVM and waits (up to 60 s: two shared cores) until the
  // server answers "imok" to "ruok" and serves requests (srvr). Throws with
  // the log's tail otherwise.
  void start() {
    if (pid_ > 0) return;
    const std::string cp =
        dir_ + ":/usr/share/java/zookeeper.jar" +
        (std::filesystem::exists(kSlf4jSimple) ? std::string(":") + kSlf4jSimple
                                               : std::string());
    std::vector<std::string> args = {
        "/usr/bin/java",
        // A small, quickly started JVM: this is a test server.
        "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Djava.net.preferIPv4Stack=true",
        "-Dorg.slf4j.simpleLogger.showDateTime=true"};
    args.insert(args.end(), options_.jvm_flags.begin(),
                options_.jvm_flags.end());
    for (const char* a :
         {"-cp", cp.c_str(),
          "org.apache.zookeeper.server.quorum.QuorumPeerMain"}) {
      args.emplace_back(a);
    }
    args.push_back(dir_ + "/zoo.cfg");
    const auto t0 = std::chrono::steady_clock::now();
    // Never outlives the test; never holds the test's sockets or stdout.
    pid_ = spawn_logged(args, log_path());
    if (pid_ < 0) throw std::runtime_error("fork failed");
    const auto limit = t0 + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < limit) {
      if (serving()) {
        start_time_ = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - t0);
        std::fprintf(stderr,
                     "[zk_process] ZooKeeper on port %u up in %lld ms\n",
                     static_cast<unsigned>(port_),
                     static_cast<long long>(start_time_.count()));
        return;
      }
      int status = 0;
      if (child_exited(pid_, &status)) {
        throw std::runtime_error("ZooKeeper exited during start (status " +
                                 std::to_string(status) + "): " + log_tail());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill9();
    throw std::runtime_error("ZooKeeper did not answer ruok on port " +
                             std::to_string(port_) +
                             " within 60 s: " + log_tail());
  }

  // SIGTERM, then SIGKILL if it is still running 5 s later.
  void stop() { stop_child(pid_, std::chrono::seconds(5)); }
  void kill9() { kill_child(pid_); }
  void pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
  }
  void resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }
  // Same port, same data dir: znodes, sessions and the zxid survive (every
  // write was fsynced unless force_sync is off).
  void restart() {
    stop();
    start();
  }
  bool running() const { return pid_ > 0; }

  // A four-letter word ("ruok", "srvr", "stat", "wchp", "wchs", "wchc",
  // "cons", "mntr") on
  // a plain socket; the reply text, or "" if the server did not answer
  // within `limit`.
  std::string four_letter(
      const std::string& cmd,
      std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) const {
    return loopback_request(cmd, port_, limit);  // the server closes
  }
  bool ruok() const {
    return four_letter("ruok", std::chrono::milliseconds(1000)) == "imok";
  }
  // ruok answers imok while the server still loads its database; srvr then
  // says "This ZooKeeper instance is not currently serving requests".
  bool serving() const {
    if (!ruok()) return false;
    const std::string s = four_letter("srvr", std::chrono::milliseconds(1000));
    return s.find("Zookeeper version") != std::string::npos;
  }

  std::uint16_t port() const { return port_; }
  std::string hostport() const { return "127.0.0.1:" + std::to_string(port_); }
  // The store URL of the tests: chroot /baton-test, 4 s sessions.
  std::string url() const {
    return "zookeeper://" + hostport() + "/baton-test?session_timeout=4s";
  }
  const std::string& dir() const { return dir_; }
  std::string log_path() const { return dir_ + "/zk.log"; }
  pid_t pid() const { return pid_; }
  // How long the last start() took, fork to "imok".
  std::chrono::milliseconds start_time() const { return start_time_; }

  // The last ~2 KB of the JVM's output (for failure messages).
  std::string log_tail() const { return file_tail(log_path()); }

  static std::uint16_t free_port() { return free_loopback_port(); }

 private:
  static constexpr const char* kSlf4jSimple =
      "/usr/share/java/slf4j-simple.jar";

  void write_config() const {
    std::ofstream cfg(dir_ + "/zoo.cfg");
    cfg << "tickTime=500\n"
        << "initLimit=10\n"
        << "syncLimit=5\n"
        << "dataDir=" << dir_ << "/data\n"
        << "clientPort=" << port_ << "\n"
        << "clientPortAddress=127.0.0.1\n"
        << "admin.enableServer=false\n"
        // wchp/wchs/wchc list data watches only; mntr's zk_watch_count
        // counts child watches too.
        << "4lw.commands.whitelist=ruok,srvr,stat,wchp,wchs,wchc,cons,mntr\n"
        << "minSessionTimeout=1000\n"
        << "maxSessionTimeout=30000\n"
        << "forceSync=" << (options_.force_sync ? "yes" : "no")
        << "\n"
        // Tests open 50+ sessions from 127.0.0.1 (the default limit is 60).
        << "maxClientCnxns=0\n";
    if (!cfg) throw std::runtime_error("cannot write " + dir_ + "/zoo.cfg");
  }

  Options options_;
  std::string dir_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  std::chrono::milliseconds start_time_{0};
};

// Opens zookeeper:// (or zk://) through the public Store interface.
inline Result<std::shared_ptr<Store>> open_zk_store(const std::string& url) {
  auto s = open_store(url);
  if (!s.ok()) return std::move(s).error();
  return std::shared_ptr<Store>(std::move(*s));
}

inline Result<Client> open_zk_client(const std::string& url,
                                     const ClientOptions& options = {}) {
  auto s = open_zk_store(url);
  if (!s.ok()) return std::move(s).error();
  return Client::wrap(*s, options);
}

}  // namespace baton::testing

#endif  // BATON_TESTS_ZOOKEEPER_ZK_PROCESS_H_
