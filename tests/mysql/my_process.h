// tests/mysql/my_process.h — a private MariaDB server (Debian's mariadbd
// 10.11) for tests: on a free loopback port, in its own temp dir (data,
// socket, pid file, err.log), stopped by pid (never by name).
//
//   MyProcess db;                 // installed and started; throws if not
//   Client::open(db.url());       // "mysql://baton:...@127.0.0.1:P/baton_test"
//   db.sql("KILL 42");            // one statement as root, over the socket
//   db.restart();                 // same port, same data dir
//
// The store's user `baton` has a password and rights on `baton_test` only
// (the grant tables are on: authentication is real). Commits are durable
// (innodb_flush_log_at_trx_commit=1, the default) unless Options::durable
// is false. mariadbd gets PR_SET_PDEATHSIG SIGKILL: it dies with the
// *thread* that started it, so start it from a thread that outlives it.
//
// Thread safety: none; one thread drives a MyProcess. sql() may be called
// from any thread.
#ifndef BATON_TESTS_MYSQL_MY_PROCESS_H_
#define BATON_TESTS_MYSQL_MY_PROCESS_H_

#include <mysql.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "child_process.h"

namespace baton::testing {

class MyProcess {
 public:
  struct Options {
    bool durable = true;  // innodb_flush_log_at_trx_commit=1
    // TLS (all three or none): mariadbd's --ssl-ca, --ssl-cert, --ssl-key.
    // mariadbd runs as this process's user (root: --user=root), so files
    // in a 0700 temp dir of that user are readable to it.
    std::string ssl_ca, ssl_cert, ssl_key;
    // More loopback addresses to listen on besides 127.0.0.1 (e.g.
    // "127.0.0.2": a name a certificate for 127.0.0.1 does not cover).
    std::vector<std::string> extra_addresses;
  };
  static constexpr const char* kPassword = "b4t0n-secret";

  MyProcess() : MyProcess(Options{}) {}
  explicit MyProcess(Options options) : options_(std::move(options)) {
    char tmpl[] = "/tmp/baton-my-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    port_ = free_port();
    install();
    start();
    sql("CREATE DATABASE IF NOT EXISTS baton_test");
    sql(std::string("CREATE USER IF NOT EXISTS 'baton'@'127.0.0.1' "
                    "IDENTIFIED BY '") +
        kPassword + "'");
    sql("GRANT ALL ON baton_test.* TO 'baton'@'127.0.0.1'");
  }
  ~MyProcess() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  MyProcess(const MyProcess&) = delete;
  MyProcess& operator=(const MyProcess&) = delete;

  void start() {
    if (pid_ > 0) return;
    std::string bind = "127.0.0.1";
    for (const std::string& a : options_.extra_addresses) bind += "," + a;
    std::vector<std::string> args = {
        "/usr/sbin/mariadbd",
        "--no-defaults",
        "--user=root",
        "--datadir=" + dir_ + "/data",
        "--bind-address=" + bind,
        "--port=" + std::to_string(port_),
        "--socket=" + socket_path(),
        "--pid-file=" + dir_ + "/mysqld.pid",
        "--skip-log-bin",
        "--log-error=" + dir_ + "/err.log",
        "--skip-name-resolve",
        "--innodb-buffer-pool-size=64M",
        "--max-connections=1000",
        std::string("--innodb-flush-log-at-trx-commit=") +
            (options_.durable ? "1" : "2")};
    if (!options_.ssl_cert.empty()) {
      args.push_back("--ssl-ca=" + options_.ssl_ca);
      args.push_back("--ssl-cert=" + options_.ssl_cert);
      args.push_back("--ssl-key=" + options_.ssl_key);
    }
    const auto t0 = std::chrono::steady_clock::now();
    pid_ = spawn_logged(args, dir_ + "/stdout.log");
    if (pid_ < 0) throw std::runtime_error("fork failed");
    const auto limit = t0 + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < limit) {
      if (ping()) {
        std::fprintf(stderr, "[my_process] MariaDB on port %u up in %lld ms\n",
                     static_cast<unsigned>(port_),
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count()));
        return;
      }
      int status = 0;
      if (child_exited(pid_, &status)) {
        throw std::runtime_error("mariadbd exited during start: " + log_tail());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill9();
    throw std::runtime_error("mariadbd did not answer within 60 s: " +
                             log_tail());
  }

  void stop() { stop_child(pid_, std::chrono::seconds(30)); }
  void kill9() { kill_child(pid_); }
  void restart() {
    stop();
    start();
  }

  // Runs statements as root over the socket; returns the first column of
  // the first row of the last result (or ""). Throws on an error.
  std::string sql(const std::string& q) const {
    MYSQL* m = mysql_init(nullptr);
    const unsigned secs = 10;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &secs);
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &secs);
    if (mysql_real_connect(m, nullptr, "root", "", nullptr, 0,
                           socket_path().c_str(),
                           CLIENT_MULTI_STATEMENTS) == nullptr) {
      std::string e = mysql_error(m);
      mysql_close(m);
      throw std::runtime_error("connect as root: " + e);
    }
    std::string out;
    if (mysql_real_query(m, q.data(), q.size()) != 0) {
      std::string e = mysql_error(m);
      mysql_close(m);
      throw std::runtime_error(q + ": " + e);
    }
    do {
      if (MYSQL_RES* r = mysql_store_result(m)) {
        MYSQL_ROW row = mysql_fetch_row(r);
        out = (row != nullptr && row[0] != nullptr) ? row[0] : "";
        mysql_free_result(r);
      }
    } while (mysql_next_result(m) == 0);
    mysql_close(m);
    return out;
  }
  bool ping() const {
    try {
      return sql("SELECT 1") == "1";
    } catch (const std::exception&) {
      return false;
    }
  }

  std::uint16_t port() const { return port_; }
  std::string url(const std::string& query = "") const {
    return std::string("mysql://baton:") + kPassword +
           "@127.0.0.1:" + std::to_string(port_) + "/baton_test" +
           (query.empty() ? "" : "?" + query);
  }
  const std::string& dir() const { return dir_; }
  std::string socket_path() const { return dir_ + "/mysqld.sock"; }
  pid_t pid() const { return pid_; }

  std::string log_tail() const { return file_tail(dir_ + "/err.log"); }

  static std::uint16_t free_port() { return free_loopback_port(); }

 private:
  // mariadb-install-db, twice at most: Debian's mariadbd 10.11 once crashed
  // (SIGSEGV) bootstrapping the system tables (1 torture run in ~100); a
  // second bootstrap into a fresh data dir is a new server.
  void install() {
    for (int attempt = 1;; ++attempt) {
      std::error_code ec;
      std::filesystem::remove_all(dir_ + "/data", ec);
      try {
        run({"/usr/bin/mariadb-install-db", "--no-defaults", "--user=root",
             "--datadir=" + dir_ + "/data",
             "--auth-root-authentication-method=normal", "--skip-test-db"},
            dir_ + "/install-" + std::to_string(attempt) + ".log");
        return;
      } catch (const std::runtime_error&) {
        if (attempt == 2) throw;
      }
    }
  }

  static void run(const std::vector<std::string>& args,
                  const std::string& log) {
    const pid_t pid = spawn_logged(args, log);
    if (pid < 0) throw std::runtime_error("fork failed");
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw std::runtime_error(args[0] + " failed: " + file_tail(log, 1 << 20));
    }
  }

  Options options_;
  std::string dir_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_MYSQL_MY_PROCESS_H_
