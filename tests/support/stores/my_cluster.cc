// tests/support/stores/my_cluster.cc — kind mysql: one private MariaDB
// 10.11 (Debian's mariadb-server) in the given directory, on a free
// loopback port, behind per-slot TcpProxies like the other kinds
// (proxied.h).
//
// Installed with mariadb-install-db, started as mariadbd (fork/exec,
// PR_SET_PDEATHSIG, durable commits: innodb_flush_log_at_trx_commit=1),
// ready when `mariadb-admin ping` answers over its socket; killed -9 by pid
// and restarted on the same port and data dir; frozen with SIGSTOP /
// SIGCONT. The store (mysql://, src/stores/mysql) is reached by URL through
// the registry: nothing of it is compiled in here.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "tests/support/stores/proxied.h"

namespace baton::testing {
namespace {

using std::chrono::steady_clock;

constexpr const char* kPassword = "torture-pw";

// A server or tool run here: stays up on Ctrl-C, which the torture
// harness answers by finishing its run.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  return spawn_logged(args, log, /*ignore_sigint=*/true);
}

int run_wait(std::vector<std::string> args, const std::string& log) {
  const pid_t pid = spawn(std::move(args), log);
  if (pid < 0) return -1;
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class MyServer {
 public:
  explicit MyServer(std::string dir) : dir_(std::move(dir)) {}
  ~MyServer() { kill9(); }

  bool configure(std::string* error) {
    ::mkdir(dir_.c_str(), 0700);
    port_ = free_loopback_port();
    if (port_ == 0) {
      *error = "mysql: no free loopback port";
      return false;
    }
    // Twice at most: Debian's mariadbd 10.11 can crash (SIGSEGV in
    // Create_tmp_table::cleanup_on_failure) while bootstrapping the system
    // tables, about 1 start in 100; a second bootstrap into a fresh data
    // dir is a new server, not a retried operation.
    for (int attempt = 1; attempt <= 2; ++attempt) {
      std::error_code ec;
      std::filesystem::remove_all(dir_ + "/data", ec);
      const std::string log =
          dir_ + "/install" + (attempt == 1 ? "" : "-2") + ".log";
      if (run_wait(
              {"/usr/bin/mariadb-install-db", "--no-defaults", "--user=root",
               "--datadir=" + dir_ + "/data",
               "--auth-root-authentication-method=normal", "--skip-test-db"},
              log) == 0) {
        return true;
      }
      *error = "mysql: mariadb-install-db failed; see " + log;
    }
    return false;
  }

  bool start(std::string* error) {
    if (pid_ > 0) return true;
    pid_ = spawn({"/usr/sbin/mariadbd", "--no-defaults", "--user=root",
                  "--datadir=" + dir_ + "/data", "--bind-address=127.0.0.1",
                  "--port=" + std::to_string(port_), "--socket=" + sock(),
                  "--pid-file=" + dir_ + "/mysqld.pid", "--skip-log-bin",
                  "--log-error=" + dir_ + "/err.log", "--skip-name-resolve",
                  "--innodb-buffer-pool-size=64M", "--max-connections=1000",
                  "--innodb-flush-log-at-trx-commit=1"},
                 dir_ + "/stdout.log");
    if (pid_ < 0) {
      *error = std::string("mysql: fork: ") + std::strerror(errno);
      return false;
    }
    const auto until = steady_clock::now() + std::chrono::seconds(30);
    while (steady_clock::now() < until) {
      int st = 0;
      if (child_exited(pid_, &st)) {
        *error = "mysql: mariadbd exited at start; see " + dir_ + "/err.log";
        return false;
      }
      if (sql("SELECT 1")) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill9();
    *error =
        "mysql: mariadbd did not answer within 30 s; see " + dir_ + "/err.log";
    return false;
  }

  bool sql(const std::string& q) const {
    return run_wait({"/usr/bin/mariadb", "--no-defaults", "-S", sock(),
                     "-uroot", "-e", q},
                    dir_ + "/client.log") == 0;
  }

  void kill9() { kill_child(pid_); }
  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }

 private:
  std::string sock() const { return dir_ + "/mysqld.sock"; }
  std::string dir_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

class MyCluster : public Proxied {
 public:
  MyCluster(const StoreOptions& o, const std::string& dir)
      : o_(o), server_(dir + "/mysql") {}
  ~MyCluster() override {
    if (frozen_) ::kill(server_.pid(), SIGCONT);
    drop_proxies();
  }

  bool init(std::string* error) {
    if (!server_.configure(error) || !server_.start(error)) return false;
    if (!server_.sql(std::string("CREATE DATABASE baton_torture;"
                                 "CREATE USER 'baton'@'127.0.0.1' "
                                 "IDENTIFIED BY '") +
                     kPassword +
                     "'; GRANT ALL ON baton_torture.* TO "
                     "'baton'@'127.0.0.1'")) {
      *error = "mysql: could not create the test database and user";
      return false;
    }
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
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (server_.start(error)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return false;
  }
  bool freeze(bool on, std::string* why) override {
    if (server_.pid() <= 0) {
      if (why != nullptr) *why = "mariadbd is not running";
      return false;
    }
    ::kill(server_.pid(), on ? SIGSTOP : SIGCONT);
    frozen_ = on;
    return true;
  }

 private:
  std::string make_url(const std::string& hostport) const {
    return std::string("mysql://baton:") + kPassword + "@" + hostport +
           "/baton_torture";
  }

  StoreOptions o_;
  MyServer server_;
  bool frozen_ = false;
};

}  // namespace

std::unique_ptr<StoreCluster> start_mysql(const StoreOptions& options,
                                          const std::string& dir,
                                          std::string* error) {
  return opened(std::make_unique<MyCluster>(options, dir), error);
}

}  // namespace baton::testing
