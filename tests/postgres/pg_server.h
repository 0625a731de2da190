// tests/postgres/pg_server.h — a private PostgreSQL 15 for tests: initdb in
// a temp dir owned by the `postgres` user, a free loopback port, fsync off;
// started and stopped with pg_ctl (as `postgres` via runuser when the test
// runs as root), crashed (`-m immediate`) or frozen (SIGSTOP to the whole
// server) for fault tests. Also a tiny libpq helper for SQL from the test
// side.
#ifndef BATON_TESTS_POSTGRES_PG_SERVER_H_
#define BATON_TESTS_POSTGRES_PG_SERVER_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace baton::testing {

inline std::string sh(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (status != nullptr) *status = st;
  return out;
}

// TLS for a PgServer: PEM files (copied into the data directory, owned by
// the server's user, mode 0600) and the pg_hba.conf to use instead of
// initdb's (e.g. hostssl lines and a `hostnossl ... reject`).
struct PgTls {
  std::string cert, key, ca;
  std::string hba;
};

class PgServer {
 public:
  explicit PgServer(const PgTls* tls = nullptr) {
    char tmpl[] = "/tmp/baton-pg-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    as_postgres_ = ::geteuid() == 0;
    if (as_postgres_) {
      const passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr) throw std::runtime_error("no postgres user");
      if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        throw std::runtime_error("chown " + dir_);
      }
    }
    port_ = free_port();
    int st = 0;
    const std::string out =
        run(std::string(kBin) + "/initdb -D " + dir_ +
                "/data -A trust -U postgres --no-sync -E UTF8 --locale=C",
            &st);
    if (st != 0) throw std::runtime_error("initdb failed: " + out);
    if (tls != nullptr) setup_tls(*tls);
    start_watchdog();
    start();
  }
  ~PgServer() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    if (watchdog_fd_ >= 0) ::close(watchdog_fd_);
    if (watchdog_pid_ > 0) ::waitpid(watchdog_pid_, nullptr, 0);
  }
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  void start() {
    int st = 0;
    const std::string out =
        run(std::string(kBin) + "/pg_ctl -D " + dir_ + "/data -l " + dir_ +
                "/pg.log -w -t 60 -o \"-p " + std::to_string(port_) + " -k " +
                dir_ + " -c listen_addresses=127.0.0.1 -c fsync=off " +
                "-c synchronous_commit=off -c full_page_writes=off " +
                "-c max_connections=300" + tls_opts_ + "\" start",
            &st);
    if (st != 0) throw std::runtime_error("pg_ctl start failed: " + out);
    running_ = true;
  }
  void stop() {
    if (!running_) return;
    signal_server(SIGCONT);  // a frozen server cannot shut down
    run(std::string(kBin) + "/pg_ctl -D " + dir_ + "/data -m fast -w stop");
    running_ = false;
  }
  void restart() {
    stop();
    start();
  }
  // Stops at once, like a crash (`pg_ctl stop -m immediate`: no checkpoint,
  // clients are cut off); start() brings it back on the same port and data
  // directory, after crash recovery.
  void stop_immediate() {
    if (!running_) return;
    signal_server(SIGCONT);
    run(std::string(kBin) + "/pg_ctl -D " + dir_ +
        "/data -m immediate -w stop");
    running_ = false;
  }
  // The postmaster's pid (first line of postmaster.pid), -1 if none.
  pid_t postmaster_pid() const {
    std::ifstream in(dir_ + "/data/postmaster.pid");
    long pid = -1;
    if (!(in >> pid) || pid <= 1) return -1;
    return static_cast<pid_t>(pid);
  }
  // Sends `sig` to the postmaster, then to each of its children (backends,
  // checkpointer, WAL writer...: each one leads a process group of its own,
  // so the postmaster's group is not enough). SIGSTOP freezes the whole
  // server: the postmaster is seen stopped (no more forks) before its
  // children are listed. SIGCONT thaws it. False if it is not running.
  bool signal_server(int sig) const {
    const pid_t pm = postmaster_pid();
    if (!running_ || pm <= 0 || ::kill(pm, sig) != 0) return false;
    for (int i = 0; sig == SIGSTOP && i < 200 && state_of(pm) != 'T'; ++i) {
      ::usleep(5000);
    }
    for (pid_t child : children_of(pm)) ::kill(child, sig);
    return true;
  }
  bool running() const { return running_; }

  std::uint16_t port() const { return port_; }
  std::string url(const std::string& query = "") const {
    return "postgres://postgres@127.0.0.1:" + std::to_string(port_) +
           "/postgres" + (query.empty() ? "" : "?" + query);
  }
  std::string conninfo() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) +
           " user=postgres dbname=postgres";
  }

 private:
  static constexpr const char* kBin = "/usr/lib/postgresql/15/bin";

  void setup_tls(const PgTls& tls) {
    const std::string data = dir_ + "/data/";
    std::filesystem::copy_file(tls.cert, data + "server.pem");
    std::filesystem::copy_file(tls.key, data + "server.key");
    std::filesystem::copy_file(tls.ca, data + "ca.pem");
    std::ofstream(data + "pg_hba.conf", std::ios::trunc) << tls.hba;
    for (const char* f :
         {"server.pem", "server.key", "ca.pem", "pg_hba.conf"}) {
      const std::string path = data + f;
      ::chmod(path.c_str(), 0600);
      if (as_postgres_) {
        const passwd* pw = ::getpwnam("postgres");
        if (pw == nullptr || ::chown(path.c_str(), pw->pw_uid, pw->pw_gid)) {
          throw std::runtime_error("chown " + path);
        }
      }
    }
    tls_opts_ =
        " -c ssl=on -c ssl_cert_file=server.pem "
        "-c ssl_key_file=server.key -c ssl_ca_file=ca.pem";
  }

  std::string run(const std::string& cmd, int* status = nullptr) const {
    if (!as_postgres_) return sh(cmd, status);
    std::string quoted;
    for (char c : cmd) {
      if (c == '\'') {
        quoted += "'\\''";
      } else {
        quoted += c;
      }
    }
    return sh("cd / && runuser -u postgres -- sh -c '" + quoted + "'", status);
  }

  // A detached shell that stops the server and removes its directory when
  // this process dies without running its destructor (a ctest timeout, a
  // crash): it waits for EOF on a pipe only this process holds open.
  void start_watchdog() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return;
    const std::string stop_cmd =
        std::string(kBin) + "/pg_ctl -D " + dir_ + "/data -m immediate -w stop";
    const std::string script =
        "read x; cd / ; " +
        (as_postgres_ ? "runuser -u postgres -- " + stop_cmd : stop_cmd) +
        " >/dev/null 2>&1; rm -rf " + dir_;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setsid();
      ::dup2(p[0], 0);
      ::execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(p[0]);
    if (pid < 0) {
      ::close(p[1]);
      return;
    }
    watchdog_fd_ = p[1];
    watchdog_pid_ = pid;
  }

  // (state, parent) from /proc/PID/stat; state 0 if gone.
  static std::pair<char, pid_t> stat_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(in, line)) return {0, -1};
    const auto paren = line.rfind(')');
    if (paren == std::string::npos || paren + 4 >= line.size()) return {0, -1};
    char state = line[paren + 2];
    long ppid = std::strtol(line.c_str() + paren + 4, nullptr, 10);
    return {state, static_cast<pid_t>(ppid)};
  }
  static char state_of(pid_t pid) { return stat_of(pid).first; }
  static std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name.empty() ||
          name.find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      const pid_t pid = static_cast<pid_t>(std::stol(name));
      if (stat_of(pid).second == parent) out.push_back(pid);
    }
    return out;
  }

  static std::uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(fd);
      throw std::runtime_error("no free port");
    }
    ::close(fd);
    return ntohs(a.sin_port);
  }

  std::string dir_;
  std::uint16_t port_ = 0;
  bool as_postgres_ = false;
  bool running_ = false;
  std::string tls_opts_;  // postgres -c settings for TLS, "" without
  int watchdog_fd_ = -1;
  pid_t watchdog_pid_ = -1;
};

// One server per test binary, stopped at exit.
inline PgServer*& pg_server_slot() {
  static PgServer* p = nullptr;
  return p;
}
inline PgServer& pg_server() {
  static const bool started = [] {
    pg_server_slot() = new PgServer();
    std::atexit([] {
      delete pg_server_slot();
      pg_server_slot() = nullptr;
    });
    return true;
  }();
  (void)started;
  return *pg_server_slot();
}

// Plain SQL from the test side (its own connection).
class Sql {
 public:
  explicit Sql(const std::string& conninfo)
      : c_(PQconnectdb(conninfo.c_str())) {}
  ~Sql() { PQfinish(c_); }
  bool ok() const { return PQstatus(c_) == CONNECTION_OK; }
  // First column of the first row ("" if none); "ERROR: ..." on failure.
  std::string one(const std::string& sql) {
    PGresult* r = PQexec(c_, sql.c_str());
    std::string out;
    const auto st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      out = std::string("ERROR: ") + PQresultErrorMessage(r);
    } else if (PQntuples(r) > 0 && PQnfields(r) > 0) {
      out = PQgetvalue(r, 0, 0);
    }
    PQclear(r);
    return out;
  }
  PGconn* raw() { return c_; }

 private:
  PGconn* c_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_POSTGRES_PG_SERVER_H_
