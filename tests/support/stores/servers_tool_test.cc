// tests/support/stores/servers_tool_test.cc — baton_test_servers driven as
// a test in another language would: its stdout facts, a lock taken through
// the URL it printed, its commands (freeze, isolate, kill, restart, bad
// ones) with their effect checked through the store, and its stop on
// `quit`, EOF and SIGTERM with no server process left behind. Only batond
// and sqlite, which start in well under a second.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "child_process.h"
#include "gtest/gtest.h"

namespace baton::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The tool as a child: its stdin and stdout are pipes held here, its
// stderr goes to <dir>/tool.err.
class Tool {
 public:
  Tool(const std::vector<std::string>& args, const std::string& dir)
      : dir_(dir) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    std::vector<std::string> a = {BATON_TEST_SERVERS};
    a.insert(a.end(), args.begin(), args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      const int err = ::open((dir + "/tool.err").c_str(),
                             O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) ::dup2(err, 2);
      std::vector<char*> argv;
      for (auto& s : a) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Tool() {
    close_stdin();
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0 && exit_code(milliseconds(20'000)) == -1) {
      ADD_FAILURE() << "baton_test_servers had to be killed";
    }
  }

  // The next line of stdout without its newline; false on EOF or after
  // `limit`.
  bool line(std::string* out, milliseconds limit = milliseconds(30'000)) {
    const auto until = steady_clock::now() + limit;
    for (;;) {
      const auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        *out = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return true;
      }
      const auto left =
          std::chrono::duration_cast<milliseconds>(until - steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char c[512];
      const ssize_t n = ::read(from_, c, sizeof c);
      if (n <= 0) return false;
      buf_.append(c, static_cast<std::size_t>(n));
    }
  }
  // Facts up to `ready` (key=value); {"error", why} if the tool failed.
  std::map<std::string, std::string> facts() {
    std::map<std::string, std::string> f;
    std::string l;
    while (line(&l) && l != "ready") {
      const auto eq = l.find('=');
      if (l.rfind("error ", 0) == 0) {
        f["error"] = l.substr(6);
        break;
      }
      if (eq != std::string::npos) f[l.substr(0, eq)] = l.substr(eq + 1);
    }
    if (l != "ready" && f.count("error") == 0) f["error"] = "no ready line";
    return f;
  }
  // Sends one command line; its answer ("" if none came).
  std::string command(const std::string& cmd) {
    const std::string l = cmd + "\n";
    if (::write(to_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) {
      return "";
    }
    std::string answer;
    return line(&answer) ? answer : "";
  }
  void close_stdin() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  // The exit status once it exits within `limit`; -1 (and killed) if not.
  int exit_code(milliseconds limit = milliseconds(20'000)) {
    if (pid_ <= 0) return code_;
    const auto until = steady_clock::now() + limit;
    int st = 0;
    while (steady_clock::now() < until) {
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return code_;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    kill_child(pid_);
    code_ = -1;
    return code_;
  }
  pid_t pid() const { return pid_; }
  std::string err() const { return file_tail(dir_ + "/tool.err"); }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int code_ = -1;
  std::string buf_;
};

// Parent pid of `pid` from /proc (-1 if gone).
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  std::getline(in, all);
  const auto paren = all.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(all.substr(paren + 1));
  std::string state;
  long ppid = -1;
  rest >> state >> ppid;
  return static_cast<pid_t>(ppid);
}

// Every live process below `root` (children, their children, ...).
std::set<pid_t> descendants(pid_t root) {
  std::map<pid_t, pid_t> parent;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string n = e.path().filename();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(n));
    parent[pid] = parent_of(pid);
  }
  std::set<pid_t> out = {root};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, ppid] : parent) {
      if (out.count(ppid) > 0 && out.insert(pid).second) grew = true;
    }
  }
  out.erase(root);
  return out;
}

// Live processes whose command line mentions `dir` (the servers put their
// data there), other than this test.
std::vector<pid_t> processes_naming(const std::string& dir) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string n = e.path().filename();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::stringstream ss;
    ss << in.rdbuf();
    const pid_t pid = static_cast<pid_t>(std::stol(n));
    if (pid != ::getpid() && ss.str().find(dir) != std::string::npos) {
      out.push_back(pid);
    }
  }
  return out;
}

bool alive(pid_t pid) {
  // A zombie is not running: only its parent has not reaped it yet.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  if (!std::getline(in, all)) return false;
  const auto paren = all.rfind(')');
  return paren != std::string::npos && paren + 2 < all.size() &&
         all[paren + 2] != 'Z';
}

std::string temp_dir() {
  std::string t =
      (std::filesystem::temp_directory_path() / "baton-servers-tool-XXXXXX")
          .string();
  return ::mkdtemp(t.data()) != nullptr ? t : "";
}

// True if a lock named `name` can be taken and released through `url`
// with no call waiting longer than `limit` for the store. A frozen or
// cut-off server is expected to fail a short limit; a serving one is
// given a long one (a loaded machine).
bool takes_lock(const std::string& url, const std::string& name,
                milliseconds limit = milliseconds(10'000)) {
  ClientOptions o;
  o.request_timeout = limit;
  o.max_retries = 0;
  auto c = Client::open(url, o);
  if (!c) return false;
  AcquireOptions a;
  a.ttl = milliseconds(10'000);
  auto lease = c->try_acquire(name, a);
  if (!lease) return false;
  auto released = c->release(*lease);
  return released.ok() && *released;
}

// Not served within a short limit.
bool refused(const std::string& url, const std::string& name) {
  return !takes_lock(url, name, milliseconds(700));
}

class ServersToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    ASSERT_FALSE(dir_.empty());
    dir_ = std::filesystem::canonical(dir_).string();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(ServersToolTest, BatondFactsCommandsAndQuit) {
  Tool tool({"--kind", "batond", "--dir", dir_ + "/run", "--slots", "2"}, dir_);
  auto f = tool.facts();
  ASSERT_EQ(f.count("error"), 0u) << f["error"] << "\n" << tool.err();
  EXPECT_EQ(f["servers"], "1");
  EXPECT_EQ(f.count("pg_conninfo"), 0u);
  EXPECT_EQ(f["url"], f["slot_url.0"]);
  ASSERT_EQ(f["direct_url"].rfind("baton://127.0.0.1:", 0), 0u);
  // Through proxies: each slot has its own port, neither is the server's.
  EXPECT_NE(f["slot_url.0"], f["slot_url.1"]);
  EXPECT_NE(f["slot_url.0"], f["direct_url"]);
  EXPECT_EQ(f.count("slot_url.2"), 0u);
  const std::set<pid_t> servers = descendants(tool.pid());
  EXPECT_FALSE(servers.empty()) << "no batond below the tool";
  // Each refused() uses a lock of its own: a request that reached a
  // frozen server may be granted once it runs again.

  EXPECT_TRUE(takes_lock(f["url"], "tool-a"));
  EXPECT_EQ(tool.command("freeze"), "ok");
  EXPECT_TRUE(refused(f["direct_url"], "tool-refused-1"))
      << "frozen, yet served";
  EXPECT_EQ(tool.command("thaw"), "ok");
  EXPECT_TRUE(takes_lock(f["direct_url"], "tool-b"));

  EXPECT_EQ(tool.command("isolate 0"), "ok");
  EXPECT_TRUE(refused(f["slot_url.0"], "tool-refused-2")) << "isolated slot";
  EXPECT_TRUE(takes_lock(f["slot_url.1"], "tool-c"));
  EXPECT_EQ(tool.command("rejoin 0"), "ok");
  EXPECT_TRUE(takes_lock(f["slot_url.0"], "tool-c"));

  EXPECT_EQ(tool.command("kill 0"), "ok");
  EXPECT_TRUE(refused(f["direct_url"], "tool-refused-3"))
      << "killed, yet served";
  EXPECT_EQ(tool.command("restart 0"), "ok");
  EXPECT_TRUE(takes_lock(f["direct_url"], "tool-d"));

  EXPECT_EQ(tool.command("blackhole 0"), "ok");
  EXPECT_TRUE(refused(f["slot_url.1"], "tool-refused-4"));
  EXPECT_EQ(tool.command("unblackhole 0"), "ok");
  EXPECT_TRUE(takes_lock(f["slot_url.1"], "tool-e"));

  // Bad commands are refused, one answer each, and change nothing.
  for (const char* bad : {"kill 1", "kill -1", "kill x", "isolate 2",
                          "frobnicate", "", "freeze now", "delay 0 -5"}) {
    const std::string a = tool.command(bad);
    EXPECT_EQ(a.rfind("error ", 0), 0u) << "'" << bad << "' answered " << a;
  }
  EXPECT_TRUE(takes_lock(f["url"], "tool-f"));

  const std::set<pid_t> now = descendants(tool.pid());
  EXPECT_EQ(tool.command("quit"), "ok");
  EXPECT_EQ(tool.exit_code(), 0) << tool.err();
  for (pid_t p : now) EXPECT_FALSE(alive(p)) << "pid " << p << " left";
  EXPECT_TRUE(processes_naming(dir_).empty());
  EXPECT_TRUE(refused(f["direct_url"], "tool-refused-5")) << "batond still up";
}

TEST_F(ServersToolTest, SqliteStopsOnEof) {
#ifndef BATON_TEST_HAVE_SQLITE
  GTEST_SKIP() << "built without BATON_WITH_SQLITE: no sqlite:// store";
#else
  Tool tool({"--kind", "sqlite", "--dir", dir_ + "/run"}, dir_);
  auto f = tool.facts();
  ASSERT_EQ(f.count("error"), 0u) << f["error"] << "\n" << tool.err();
  EXPECT_EQ(f["servers"], "0");
  EXPECT_EQ(f["url"], f["direct_url"]);  // no server, so no proxy
  EXPECT_EQ(f["url"], "sqlite://" + dir_ + "/run/sqlite/locks.db");
  EXPECT_TRUE(takes_lock(f["url"], "tool-a"));
  EXPECT_EQ(tool.command("freeze").rfind("error ", 0), 0u);
  EXPECT_EQ(tool.command("kill 0").rfind("error ", 0), 0u);
  tool.close_stdin();
  EXPECT_EQ(tool.exit_code(), 0) << tool.err();
  EXPECT_TRUE(processes_naming(dir_).empty());
#endif
}

TEST_F(ServersToolTest, BatondWithoutProxiesStopsOnSigterm) {
  Tool tool({"--kind", "batond", "--dir", dir_ + "/run", "--no-proxy"}, dir_);
  auto f = tool.facts();
  ASSERT_EQ(f.count("error"), 0u) << f["error"] << "\n" << tool.err();
  EXPECT_EQ(f["url"], f["direct_url"]);
  EXPECT_TRUE(takes_lock(f["url"], "tool-a"));
  EXPECT_EQ(tool.command("isolate 0").rfind("error ", 0), 0u);
  EXPECT_EQ(tool.command("freeze"), "ok");
  const std::set<pid_t> servers = descendants(tool.pid());
  ASSERT_FALSE(servers.empty());
  // Frozen when the stop comes: thawed first, then stopped.
  ::kill(tool.pid(), SIGTERM);
  EXPECT_EQ(tool.exit_code(), 0) << tool.err();
  for (pid_t p : servers) EXPECT_FALSE(alive(p)) << "pid " << p << " left";
  EXPECT_TRUE(processes_naming(dir_).empty());
}

TEST_F(ServersToolTest, BadArgumentsAreRefused) {
  {
    Tool tool({"--kind", "nosuch", "--dir", dir_ + "/run"}, dir_);
    auto f = tool.facts();
    EXPECT_NE(f["error"].find("unknown store kind 'nosuch'"), std::string::npos)
        << f["error"];
    EXPECT_EQ(tool.exit_code(), 1);
  }
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"--kind", "batond"},
           {"--kind", "batond", "--dir", dir_, "--slots", "0"},
           {"--kind", "batond", "--dir", dir_, "--bogus"},
           {"--dir", dir_}}) {
    Tool tool(args, dir_);
    std::string l;
    EXPECT_FALSE(tool.line(&l)) << "printed " << l;
    EXPECT_EQ(tool.exit_code(), 2);
    EXPECT_NE(tool.err().find("usage:"), std::string::npos) << tool.err();
  }
}

}  // namespace
}  // namespace baton::testing
