// tests/support/stores/store_cluster.cc — see store_cluster.h: batond,
// postgres, redis, rediss and redlock servers, an external store, and the
// factory of every kind.
#include "tests/support/stores/store_cluster.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace baton::testing {
namespace {
// batond runs through this path: the real binary, or a fiu-run wrapper.
std::string g_batond_exec = BATON_TEST_STORES_BATOND;
}  // namespace
}  // namespace baton::testing

#define BATOND_PATH ::baton::testing::g_batond_exec
#include "baton/client.h"
#include "tests/postgres/pg_server.h"
#include "tests/redis/redis_process.h"
#include "tests/server/batond_process.h"
#include "tests/server/test_certs.h"
#include "tests/support/server_clock.h"
#include "tests/support/stores/proxied.h"

namespace baton::testing {
namespace {

std::string port_str(std::uint16_t p) { return std::to_string(p); }

// The pids of the process listening on 127.0.0.1:port and of its children.
std::vector<pid_t> server_pids(std::uint16_t port) {
  std::set<std::string> inodes;
  char hex[8];
  std::snprintf(hex, sizeof hex, ":%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      std::istringstream ls(line);
      std::string sl, local, remote, st, q, tr, rt, uid, to, inode;
      ls >> sl >> local >> remote >> st >> q >> tr >> rt >> uid >> to >> inode;
      if (st == "0A" && local.size() > 5 && local.ends_with(hex)) {
        inodes.insert("socket:[" + inode + "]");
      }
    }
  }
  std::vector<pid_t> out;
  if (inodes.empty()) return out;
  std::map<pid_t, pid_t> parent;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    {
      std::ifstream st(std::string("/proc/") + e->d_name + "/stat");
      std::string all((std::istreambuf_iterator<char>(st)), {});
      const auto close = all.rfind(')');
      if (close != std::string::npos) {
        std::istringstream rest(all.substr(close + 1));
        std::string state;
        int ppid = 0;
        rest >> state >> ppid;
        parent[pid] = ppid;
      }
    }
    const std::string fds = std::string("/proc/") + e->d_name + "/fd";
    DIR* fd = ::opendir(fds.c_str());
    if (fd == nullptr) continue;
    while (dirent* x = ::readdir(fd)) {
      char target[128];
      const std::string link = fds + "/" + x->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (inodes.count(target) > 0 &&
          std::find(out.begin(), out.end(), pid) == out.end()) {
        out.push_back(pid);
      }
    }
    ::closedir(fd);
  }
  ::closedir(d);
  const std::size_t listeners = out.size();
  for (const auto& [pid, ppid] : parent) {
    for (std::size_t i = 0; i < listeners; ++i) {
      if (ppid == out[i] && pid != out[i]) out.push_back(pid);
    }
  }
  return out;
}

class Cluster : public Proxied {
 public:
  Cluster(const StoreOptions& o, std::string dir)
      : o_(o), dir_(std::move(dir)) {}
  ~Cluster() override {
    g_batond_exec = BATON_TEST_STORES_BATOND;
    if (!frozen_.empty()) freeze(false, nullptr);
    drop_proxies();
    batond_.reset();
    redis_.clear();
    pg_.reset();
    if (mounted_) ::umount2((dir_ + "/batond/data").c_str(), MNT_DETACH);
  }

  bool init(std::string* error) {
    try {
      std::vector<std::uint16_t> ports;
      const std::string& k = o_.kind;
      if (k == "batond") {
        start_batond(error);
        ports.push_back(batond_->port());
      } else if (k == "postgres") {
        pg_ = std::make_unique<PgServer>();
        // PgServer runs with synchronous_commit=off (fast tests); with it a
        // kill -9 loses acknowledged commits — grants and fencing counters
        // (a fencing token can then be granted twice). The store needs
        // synchronous_commit=on; a role setting overrides the server's
        // command line for every session of the test user.
        Sql sql(pg_->conninfo());
        const std::string set =
            sql.one("ALTER ROLE postgres SET synchronous_commit = on");
        if (set.rfind("ERROR", 0) == 0) {
          *error = "postgres: " + set;
          return false;
        }
        ports.push_back(pg_->port());
      } else if (k == "redis" || k == "redlock" || k == "rediss") {
        // rediss: redis:// over TLS (certificates made now, in a temp dir
        // that outlives the runs; the proxies carry the TLS bytes).
        const int n = k == "redlock" ? o_.redlock_masters : 1;
        if (k == "redlock" && (n < 3 || n > 9)) {
          *error = "redlock: 3..9 masters, not " + std::to_string(n);
          return false;
        }
        RedisTls tls;
        if (k == "rediss") {
          certs_ = std::make_unique<TestCertificates>();
          tls = {certs_->path("server.pem"), certs_->path("server.key"),
                 certs_->path("ca.pem")};
        }
        for (int i = 0; i < n; ++i) {
          // server_clocks: each master's wall clock of its own.
          std::vector<std::pair<std::string, std::string>> env;
          if (o_.server_clocks) {
            clocks_.push_back(std::make_unique<ServerClock>(
                dir_ + "/redis-clock-" + std::to_string(i)));
            if (!clocks_.back()->ok()) {
              *error =
                  "redis: server clocks need libbaton_clockshift.so (built "
                  "with the tests)";
              return false;
            }
            env = clocks_.back()->env();
          }
          redis_.push_back(std::make_unique<RedisProcess>(
              /*persistent=*/true, certs_ ? &tls : nullptr,
              /*keyspace_events=*/true, env));
          ports.push_back(redis_.back()->port());
          // restart_guard: this master's lock data counts as old (the
          // store's "born" key, src/stores/redis/scripts.cc, set to 0).
          if (k == "redlock" && o_.restart_guard.count() > 0 &&
              !redis_.back()->set("baton:born", "0")) {
            *error = "redlock: cannot mark the lock data of master " +
                     std::to_string(i) + " as old";
            return false;
          }
        }
      } else {
        *error = "unknown store kind '" + k +
                 "' (batond, postgres, redis, rediss, redlock, zookeeper, "
                 "zookeeper3, "
                 "mysql, etcd, etcds, sqlite)";
        return false;
      }
      direct_ports_ = ports;
      if (o_.proxies) {
        std::vector<std::pair<std::string, int>> hosts;
        for (auto p : ports) hosts.push_back({"127.0.0.1", p});
        auto url_of = [this](const std::vector<std::string>& via) {
          std::vector<std::uint16_t> vp;
          for (const auto& v : via) {
            vp.push_back(static_cast<std::uint16_t>(
                std::atoi(v.c_str() + v.rfind(':') + 1)));
          }
          return make_url(vp);
        };
        if (!add_proxies(o_.slots, hosts, url_of, error)) return false;
      }
      return true;
    } catch (const std::exception& e) {
      *error = e.what();
      return false;
    }
  }

  std::string direct_url() const override { return make_url(direct_ports_); }
  bool freeze(bool on, std::string* why) override {
    if (on) {
      for (auto port : direct_ports_) {
        for (pid_t p : server_pids(port)) frozen_.push_back(p);
      }
      if (frozen_.empty()) {
        if (why != nullptr) *why = "no server process found";
        return false;
      }
      for (pid_t p : frozen_) ::kill(p, SIGSTOP);
      return true;
    }
    for (auto it = frozen_.rbegin(); it != frozen_.rend(); ++it) {
      ::kill(*it, SIGCONT);
    }
    frozen_.clear();
    return true;
  }
  std::string pg_conninfo() const override {
    return pg_ ? pg_->conninfo() : "";
  }
  int servers() const override {
    return static_cast<int>(direct_ports_.size());
  }

  void kill9(int i) override {
    if (batond_) batond_->kill9();
    if (pg_) kill_postmaster();
    if (!redis_.empty()) redis_[static_cast<std::size_t>(i)]->kill9();
  }
  bool step_server_clock(int i, std::chrono::milliseconds offset,
                         std::string* why) override {
    const auto k = static_cast<std::size_t>(i);
    if (k >= clocks_.size() || !clocks_[k]->step(offset)) {
      return StoreCluster::step_server_clock(i, offset, why);
    }
    return true;
  }
  bool wipe(int i, std::string* why) override {
    if (redis_.empty()) return StoreCluster::wipe(i, why);
    redis_[static_cast<std::size_t>(i)]->wipe();
    return true;
  }

  bool restart(int i, std::string* error) override {
    for (int attempt = 0; attempt < 20; ++attempt) {
      try {
        if (batond_) batond_->start();
        if (pg_) pg_->start();
        if (!redis_.empty()) redis_[static_cast<std::size_t>(i)]->start();
        return true;
      } catch (const std::exception& e) {
        *error = e.what();
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
    }
    return false;
  }

  bool fiu_enable(const std::string& point, std::string* why) override {
    if (!fiu_) {
      *why = "batond not started under fiu-run";
      return false;
    }
    glob_t g{};
    const std::string pattern = dir_ + "/fiu-*.in";
    if (::glob(pattern.c_str(), 0, nullptr, &g) != 0 || g.gl_pathc == 0) {
      ::globfree(&g);
      *why = "no fiu control fifo in " + dir_;
      return false;
    }
    // The running batond: the fifo whose pid is alive.
    fiu_pid_.clear();
    for (std::size_t k = 0; k < g.gl_pathc; ++k) {
      const std::string fifo = g.gl_pathv[k];
      const auto dash = fifo.rfind('-');
      const std::string pid = fifo.substr(dash + 1, fifo.size() - dash - 4);
      if (::kill(static_cast<pid_t>(std::atoi(pid.c_str())), 0) == 0) {
        fiu_pid_ = pid;
      }
    }
    ::globfree(&g);
    if (fiu_pid_.empty()) {
      *why = "no live fiu-run batond in " + dir_;
      return false;
    }
    // Bounded: fiu-ctrl waits for the answer of libfiu's control thread in
    // batond, which never comes while `write` fails there (a disable of
    // posix/io/rw/write* would wait for good).
    const std::string cmd = "timeout -k 1 5 fiu-ctrl -f " + dir_ +
                            "/fiu -c 'enable name=" + point + "' " + fiu_pid_ +
                            " 2>&1";
    int st = 0;
    const std::string out = sh(cmd, &st);
    if (st != 0) *why = "fiu-ctrl: " + out;
    return st == 0;
  }
  void fiu_disable(const std::string& point) override {
    if (fiu_pid_.empty()) return;
    // Bounded as above; batond is killed and restarted right after anyway.
    sh("timeout -k 1 5 fiu-ctrl -f " + dir_ + "/fiu -c 'disable name=" + point +
       "' " + fiu_pid_ + " 2>&1");
  }

  bool disk_fill(std::string* why) override {
    if (!mounted_) {
      *why = mount_why_;
      return false;
    }
    const std::string f = dir_ + "/batond/data/filler";
    const int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
      *why = "open " + f + ": " + std::strerror(errno);
      return false;
    }
    static const std::string zeros(65536, '\0');
    for (int i = 0; i < 4096; ++i) {  // bounded: 256 MiB at most
      if (::write(fd, zeros.data(), zeros.size()) <= 0) break;
    }
    ::close(fd);
    return true;
  }
  void disk_free() override {
    if (mounted_) ::unlink((dir_ + "/batond/data/filler").c_str());
  }

 private:
  void start_batond(std::string* error) {
    const std::string bdir = dir_ + "/batond";
    ::mkdir(bdir.c_str(), 0700);
    ::mkdir((bdir + "/data").c_str(), 0700);
    if (o_.disk_faults) {
      if (::mount("tmpfs", (bdir + "/data").c_str(), "tmpfs", 0,
                  "size=8m,mode=0700") == 0) {
        mounted_ = true;
      } else {
        mount_why_ = std::string("mount tmpfs: ") + std::strerror(errno) +
                     " (needs root / CAP_SYS_ADMIN)";
      }
      if (::access("/usr/bin/fiu-run", X_OK) == 0) {
        const std::string wrapper = dir_ + "/batond-fiu.sh";
        std::ofstream w(wrapper);
        w << "#!/bin/sh\nexec /usr/bin/fiu-run -x -f " << dir_ << "/fiu "
          << BATON_TEST_STORES_BATOND << " \"$@\"\n";
        w.close();
        ::chmod(wrapper.c_str(), 0700);
        g_batond_exec = wrapper;
        fiu_ = true;
      }
    }
    batond_ = std::make_unique<BatondProcess>(
        bdir, std::vector<std::string>{"--fsync", "always"});
    (void)error;  // g_batond_exec stays: restarts run under fiu-run too
  }

  // kill -9 the postmaster (found by its -p port among our processes).
  void kill_postmaster() {
    DIR* d = ::opendir("/proc");
    if (d == nullptr) return;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::ifstream f(std::string("/proc/") + e->d_name + "/cmdline");
      std::stringstream ss;
      ss << f.rdbuf();
      const std::string cmd = ss.str();
      if (cmd.find("/postgres") == std::string::npos) continue;
      const std::string port_arg =
          std::string("-p") + '\0' + port_str(pg_->port()) + '\0';
      if (cmd.find(port_arg) == std::string::npos) continue;
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      ::kill(pid, SIGKILL);
      for (int i = 0; i < 100 && ::kill(pid, 0) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    ::closedir(d);
  }

  std::string make_url(const std::vector<std::uint16_t>& ports) const {
    const std::string& k = o_.kind;
    if (k == "batond") return "baton://127.0.0.1:" + port_str(ports[0]);
    if (k == "postgres") {
      return "postgres://postgres@127.0.0.1:" + port_str(ports[0]) +
             "/postgres";
    }
    if (k == "redis") return "redis://127.0.0.1:" + port_str(ports[0]);
    if (k == "rediss") {
      return "rediss://127.0.0.1:" + port_str(ports[0]) +
             "?ca=" + certs_->path("ca.pem");
    }
    if (k == "redlock") {
      std::string u = "redlock://";
      for (std::size_t i = 0; i < ports.size(); ++i) {
        u += (i ? ",127.0.0.1:" : "127.0.0.1:") + port_str(ports[i]);
      }
      if (o_.restart_guard.count() > 0) {
        u +=
            "?restart_guard=" + std::to_string(o_.restart_guard.count()) + "ms";
      }
      return u;
    }
    return "memory:";
  }

  StoreOptions o_;
  std::string dir_;
  std::unique_ptr<BatondProcess> batond_;
  std::unique_ptr<PgServer> pg_;
  std::vector<std::unique_ptr<RedisProcess>> redis_;
  std::unique_ptr<TestCertificates> certs_;  // rediss only
  // Each redis-server's wall clock, with StoreOptions::server_clocks.
  std::vector<std::unique_ptr<ServerClock>> clocks_;
  std::vector<std::uint16_t> direct_ports_;
  std::vector<pid_t> frozen_;  // stopped by freeze(true)
  bool mounted_ = false;
  std::string mount_why_ = "disk faults off";
  bool fiu_ = false;
  std::string fiu_pid_;
};

// A store that runs elsewhere (StoreOptions::external_url): nothing is
// started, killed or restarted here. Each slot reaches each of the URL's
// servers through a TcpProxy of its own (network faults); direct_url() is
// the URL as given.
class External : public Proxied {
 public:
  explicit External(const StoreOptions& o) : o_(o) {}

  bool init(std::string* error) {
    const std::string& u = o_.external_url;
    const auto scheme_end = u.find("://");
    if (scheme_end == std::string::npos) {
      *error = "store URL " + u + ": expected scheme://host:port[,...]...";
      return false;
    }
    {  // the URL must name a store baton can open (clear error otherwise)
      auto c = Client::open(u);
      if (!c) {
        *error = "store URL " + u + ": " + c.error().to_string();
        return false;
      }
    }
    const std::size_t start = scheme_end + 3;
    std::size_t end = u.find_first_of("/?", start);
    if (end == std::string::npos) end = u.size();
    std::string auth = u.substr(start, end - start);
    const auto at = auth.rfind('@');
    const std::string userinfo =
        at == std::string::npos ? "" : auth.substr(0, at + 1);
    auth = at == std::string::npos ? auth : auth.substr(at + 1);
    std::vector<std::string> hosts;
    for (std::size_t b = 0;;) {
      const auto comma = auth.find(',', b);
      hosts.push_back(auth.substr(b, comma - b));
      if (comma == std::string::npos) break;
      b = comma + 1;
    }
    std::vector<std::pair<std::string, int>> hps;
    for (const std::string& h : hosts) {
      const auto colon = h.rfind(':');
      if (colon == std::string::npos || colon + 1 >= h.size()) {
        *error = "store URL " + u + ": server '" + h + "' has no port";
        return false;
      }
      std::string host = h.substr(0, colon);
      if (host.size() > 2 && host.front() == '[') {
        host = host.substr(1, host.size() - 2);  // [::1]
      }
      hps.push_back({host, std::atoi(h.c_str() + colon + 1)});
    }
    servers_ = static_cast<int>(hosts.size());
    if (o_.proxies) {
      auto url_of = [&](const std::vector<std::string>& via) {
        std::string proxied;
        for (const auto& v : via) proxied += (proxied.empty() ? "" : ",") + v;
        return u.substr(0, start) + userinfo + proxied + u.substr(end);
      };
      if (!add_proxies(o_.slots, hps, url_of, error)) return false;
    }
    return true;
  }

  std::string direct_url() const override { return o_.external_url; }
  bool freeze(bool, std::string* why) override {
    if (why != nullptr) *why = "an external store is not stopped here";
    return false;
  }
  std::string pg_conninfo() const override { return ""; }
  int servers() const override { return servers_; }
  void kill9(int) override {}
  bool restart(int, std::string* error) override {
    *error = "an external store is not restarted here";
    return false;
  }
  bool fiu_enable(const std::string&, std::string* why) override {
    *why = "an external store";
    return false;
  }
  void fiu_disable(const std::string&) override {}
  bool disk_fill(std::string* why) override {
    *why = "an external store";
    return false;
  }
  void disk_free() override {}

 private:
  StoreOptions o_;
  int servers_ = 0;
};

}  // namespace

std::unique_ptr<StoreCluster> StoreCluster::start(const StoreOptions& options,
                                                  const std::string& dir,
                                                  std::string* error) {
  if (!options.external_url.empty()) {
    auto e = std::make_unique<External>(options);
    if (!e->init(error)) return nullptr;
    return e;
  }
  if (options.kind == "zookeeper" || options.kind == "zookeeper3") {
    return start_zookeeper(options, dir, error);
  }
  if (options.kind == "mysql") return start_mysql(options, dir, error);
  if (options.kind == "etcd" || options.kind == "etcds") {
    return start_etcd(options, dir, error);
  }
  if (options.kind == "sqlite") return start_sqlite(options, dir, error);
  auto c = std::make_unique<Cluster>(options, dir);
  if (!c->init(error)) return nullptr;
  return c;
}

}  // namespace baton::testing
