// tests/cli/supervision_test.cc — supervision: no command run by `baton run` /
// `baton elect` may outlive its lease, and no command waits on a store that
// does not answer.
//
// The commands write CLOCK_REALTIME timestamps (`date +%s%N`, one clock for
// every process of a test) to files; the key assertion is that the cut-off
// holder's last write comes before the next holder's first one. Every wait
// is bounded; TTLs are 2 s.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "process.h"
#include "tcp_proxy.h"

namespace baton::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kBaton = BATON_CLI_PATH;

// Appends a CLOCK_REALTIME timestamp (ns) to `file` every 50 ms; the
// `date` and `sleep` it runs are grandchildren of baton.
std::string writer(const std::string& file) {
  return "while :; do date +%s%N >> '" + file + "'; sleep 0.05; done";
}

std::vector<pid_t> pids_in(const std::string& file) {
  std::vector<pid_t> out;
  for (std::int64_t v : timestamps(file)) out.push_back(static_cast<pid_t>(v));
  return out;
}

// Polls `done` every 5 ms for at most `bound`.
bool eventually(const std::function<bool()>& done,
                std::chrono::milliseconds bound) {
  const auto end = Clock::now() + bound;
  while (!done()) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Running, not a zombie (a zombie answers kill(pid, 0) but runs nothing).
bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  const char state = stat[paren + 2];
  return state != 'Z' && state != 'X';
}

// The instant `p` exited, polled every 5 ms for at most `bound`.
std::optional<Clock::time_point> exit_time(Process& p,
                                           std::chrono::milliseconds bound) {
  if (!eventually([&] { return !p.running(); }, bound)) return std::nullopt;
  return Clock::now();
}

// A private batond as a Process, so that a test can SIGSTOP it.
class Batond {
 public:
  Batond() : dir_(make_temp_dir()), port_(free_port()) {
    server_ = std::make_unique<Process>(std::vector<std::string>{
        BATOND_PATH, "--listen", "127.0.0.1:" + std::to_string(port_),
        "--data-dir", dir_ + "/data"});
    ok_ = wait_for_port(port_, 10s);
  }
  ~Batond() {
    server_->signal(SIGCONT);
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return ok_; }
  std::string err() const { return server_->err(); }
  int port() const { return port_; }
  std::string url() const {
    return "baton://127.0.0.1:" + std::to_string(port_);
  }
  void signal(int sig) { server_->signal(sig); }

 private:
  std::string dir_;
  int port_;
  std::unique_ptr<Process> server_;
  bool ok_ = false;
};

class Supervision : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir(); }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

// ---------------------------------------------------------------------------
// The deadline rule (CONTRACT rules 13 and 14).

#ifdef BATOND_PATH

// The holder is cut off from the store (the proxy forwards nothing), while
// the next holder reaches batond directly. The holder's command must be
// gone before the store grants the lock again.
TEST_F(Supervision, CutOffHolderIsGoneBeforeTheNextGrant) {
  Batond batond;
  ASSERT_TRUE(batond.ok()) << batond.err();
  auto proxy =
      TcpProxy::start("127.0.0.1", static_cast<std::uint16_t>(batond.port()));
  ASSERT_TRUE(proxy.ok()) << proxy.error().to_string();
  const std::string via_proxy =
      "baton://127.0.0.1:" + std::to_string((*proxy)->port());
  Process holder({kBaton, "--store", via_proxy, "run", "m", "--ttl", "2s",
                  "--grace", "500ms", "--", "sh", "-c",
                  writer(file("holder"))});
  ASSERT_TRUE(
      eventually([&] { return timestamps(file("holder")).size() >= 3; }, 10s))
      << holder.err();

  (*proxy)->set_mode(TcpProxy::Mode::blackhole);
  const auto cut = Clock::now();
  Process next({kBaton, "--store", batond.url(), "run", "m", "--wait", "15s",
                "--", "sh", "-c", "date +%s%N >> '" + file("next") + "'"});

  auto gone = exit_time(holder, 10s);
  ASSERT_TRUE(gone) << "baton run still runs 10s after the cut";
  auto held = holder.wait(1s);
  EXPECT_EQ(held.exit_code, 76) << held.err;
  EXPECT_THAT(held.err, HasSubstr("baton: lock_lost: lease on m"));
  // The lease's safe deadline is at most TTL after the cut; baton exits
  // right after the command is gone.
  EXPECT_LT(*gone - cut, 2s + 300ms);

  auto second = next.wait(15s);
  EXPECT_EQ(second.exit_code, 0) << second.err;
  auto last = timestamps(file("holder"));
  auto first = timestamps(file("next"));
  ASSERT_FALSE(last.empty());
  ASSERT_FALSE(first.empty()) << second.err;
  EXPECT_LT(last.back(), first.front())
      << "the cut-off holder wrote " << (last.back() - first.front()) / 1000
      << " us after the next holder's first write";
  // Nothing of the command (sh, date, sleep) writes any more.
  const std::size_t writes = last.size();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(timestamps(file("holder")).size(), writes);
}

// The store freezes (SIGSTOP) and resumes just after the TTL: the
// holder's command is gone by then, and the next holder's grant comes after.
TEST_F(Supervision, HolderOfAFrozenStoreIsGoneBeforeTheNextGrant) {
  Batond batond;
  ASSERT_TRUE(batond.ok()) << batond.err();
  Process holder({kBaton, "--store", batond.url(), "run", "m", "--ttl", "2s",
                  "--grace", "500ms", "--", "sh", "-c",
                  writer(file("holder"))});
  ASSERT_TRUE(
      eventually([&] { return timestamps(file("holder")).size() >= 3; }, 10s))
      << holder.err();
  Process next({kBaton, "--store", batond.url(), "run", "m", "--wait", "20s",
                "--", "sh", "-c", "date +%s%N >> '" + file("next") + "'"});
  std::this_thread::sleep_for(100ms);  // let it queue

  batond.signal(SIGSTOP);
  auto gone = exit_time(holder, 2s + 100ms);
  batond.signal(SIGCONT);
  ASSERT_TRUE(gone) << "baton run still ran when the store resumed, "
                    << "100ms after the TTL: " << holder.err();
  auto held = holder.wait(1s);
  EXPECT_EQ(held.exit_code, 76) << held.err;
  EXPECT_THAT(held.err, HasSubstr("SIGTERM to the command"));

  auto second = next.wait(20s);
  EXPECT_EQ(second.exit_code, 0) << second.err;
  auto last = timestamps(file("holder"));
  auto first = timestamps(file("next"));
  ASSERT_FALSE(last.empty());
  ASSERT_FALSE(first.empty()) << second.err;
  EXPECT_LT(last.back(), first.front());
}

// SIGTERM `--grace` before the deadline: a command that traps it has the
// grace to finish, and no more.
TEST_F(Supervision, SigtermComesGraceBeforeTheDeadlineAndSigkillAtIt) {
  Batond batond;
  ASSERT_TRUE(batond.ok()) << batond.err();
  Process holder({kBaton, "--store", batond.url(), "run", "m", "--ttl", "2s",
                  "--grace", "600ms", "--", "sh", "-c",
                  "trap 'date +%s%N > \"" + file("term") +
                      "\"; while :; do sleep 0.05; done' TERM; " +
                      writer(file("holder"))});
  ASSERT_TRUE(
      eventually([&] { return timestamps(file("holder")).size() >= 3; }, 10s))
      << holder.err();
  batond.signal(SIGSTOP);
  const std::int64_t frozen = realtime_ns();
  auto gone = exit_time(holder, 3s);
  batond.signal(SIGCONT);
  ASSERT_TRUE(gone) << holder.err();
  const std::int64_t end = realtime_ns();
  auto held = holder.wait(1s);
  EXPECT_EQ(held.exit_code, 76) << held.err;
  auto term = timestamps(file("term"));
  ASSERT_EQ(term.size(), 1u) << held.err;
  // SIGTERM at deadline - 600ms, SIGKILL at the deadline. The deadline is
  // at most TTL after the freeze, and at least TTL - 2 renew intervals (a
  // renewal may have been in flight, unanswered, when the store froze).
  EXPECT_GT(term[0], frozen + 2'000'000'000LL - 1'333'000'000 - 600'000'000);
  EXPECT_LT(term[0], frozen + 2'000'000'000LL - 600'000'000 + 100'000'000);
  EXPECT_GT(end - term[0], 450'000'000) << "killed long before the deadline";
  EXPECT_LT(end - term[0], 600'000'000 + 150'000'000);
}

TEST_F(Supervision, ElectedCommandOfAFrozenStoreIsGoneByTheDeadline) {
  Batond batond;
  ASSERT_TRUE(batond.ok()) << batond.err();
  Process leader({kBaton, "--store", batond.url(), "elect", "g", "--ttl", "2s",
                  "--grace", "500ms", "--", "sh", "-c",
                  writer(file("leader"))});
  ASSERT_TRUE(
      eventually([&] { return timestamps(file("leader")).size() >= 3; }, 10s))
      << leader.err();
  batond.signal(SIGSTOP);
  auto gone = exit_time(leader, 2s + 100ms);
  batond.signal(SIGCONT);
  ASSERT_TRUE(gone) << "baton elect still ran 100ms after the TTL: "
                    << leader.err();
  auto r = leader.wait(1s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_THAT(r.err, HasSubstr("baton: lock_lost: leadership of g"));
}

// ---------------------------------------------------------------------------
// Bounded calls: --timeout.

TEST_F(Supervision, FrozenStoreAnswersNoCommandWithinTheTimeout) {
  Batond batond;
  ASSERT_TRUE(batond.ok()) << batond.err();
  batond.signal(SIGSTOP);
  const std::string where =
      "no answer from batond at 127.0.0.1:" + std::to_string(batond.port());
  struct Case {
    std::vector<std::string> args;
    std::chrono::milliseconds bound;
  };
  const std::vector<Case> cases = {
      {{"--timeout", "2s", "run", "m", "--", "true"}, 2s},
      {{"run", "m", "--timeout", "1s", "--", "true"}, 1s},
      {{"--timeout", "1s", "status"}, 1s},
      {{"--timeout", "1s", "acquire", "m"}, 1s},
      {{"--timeout", "1s", "counter", "get", "c"}, 1s},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {kBaton, "--store", batond.url()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto start = Clock::now();
    auto r = run(argv, {}, 30s);
    const auto took = Clock::now() - start;
    EXPECT_EQ(r.exit_code, 69) << c.args[2] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(where)) << c.args[2];
    EXPECT_LT(took, c.bound + 1500ms) << c.args[2] << ": " << r.err;
  }
  batond.signal(SIGCONT);
}

TEST_F(Supervision, TimeoutComesFromTheConfigFile) {
  Batond batond;
  ASSERT_TRUE(batond.ok()) << batond.err();
  std::ofstream(file("baton.yaml")) << "Timeout: 1s\n";
  batond.signal(SIGSTOP);
  const auto start = Clock::now();
  auto r = run({kBaton, "--config", file("baton.yaml"), "--store", batond.url(),
                "status"},
               {}, 30s);
  const auto took = Clock::now() - start;
  batond.signal(SIGCONT);
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_THAT(r.err, HasSubstr("within 1s"));
  EXPECT_LT(took, 2500ms);
}

// --wait that runs out names who kept the lock, like --wait 0 does.
TEST_F(Supervision, WaitTimeoutNamesTheHolder) {
  Batond batond;
  ASSERT_TRUE(batond.ok()) << batond.err();
  Process holder({kBaton, "--store", batond.url(), "--label", "holder-x", "run",
                  "m", "--", "sleep", "30"});
  ASSERT_TRUE(eventually(
      [&] {
        return run({kBaton, "--store", batond.url(), "status", "m", "--json"})
                   .out.find("holder-x") != std::string::npos;
      },
      10s));
  auto r = run({kBaton, "--store", batond.url(), "run", "m", "--wait", "300ms",
                "--", "true"});
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_THAT(r.err, HasSubstr("baton: timeout:"));
  EXPECT_THAT(r.err, HasSubstr("held by holder-x"));
  r = run({kBaton, "--store", batond.url(), "acquire", "m", "--wait", "300ms"});
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_THAT(r.err, HasSubstr("held by holder-x"));
}

#endif  // BATOND_PATH

// ---------------------------------------------------------------------------
// The whole command dies, and dies with baton.

TEST_F(Supervision, SigkilledRunTakesTheCommandAndItsChildrenAlong) {
  for (const char* verb : {"run", "elect"}) {
    const std::string pids = file(std::string(verb) + ".pids");
    Process baton({kBaton, "--store", "memory:", verb, "x", "--", "sh", "-c",
                   "echo $$ > '" + pids + "'; sleep 60 & echo $! >> '" + pids +
                       "'; wait"});
    ASSERT_TRUE(eventually([&] { return pids_in(pids).size() == 2; }, 10s))
        << verb << ": " << baton.err();
    baton.signal(SIGKILL);
    baton.wait(5s);
    for (pid_t pid : pids_in(pids)) {
      EXPECT_TRUE(eventually([&] { return !alive(pid); }, 2s))
          << verb << ": pid " << pid << " outlived baton";
    }
  }
}

TEST_F(Supervision, SignalsToBatonReachTheWholeGroup) {
  const std::string pids = file("pids");
  Process baton({kBaton, "--store", "memory:", "run", "x", "--", "sh", "-c",
                 "sleep 60 & echo $! > '" + pids + "'; wait"});
  ASSERT_TRUE(eventually([&] { return pids_in(pids).size() == 1; }, 10s))
      << baton.err();
  baton.signal(SIGTERM);
  auto r = baton.wait(10s);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_TRUE(eventually([&] { return !alive(pids_in(pids)[0]); }, 2s));
}

// What the command leaves behind in its process group does not run on
// after the lease is released.
TEST_F(Supervision, LeftoversOfTheCommandAreKilledWhenItExits) {
  const std::string pids = file("pids");
  auto r = run({kBaton, "--store", "memory:", "run", "x", "--", "sh", "-c",
                "sleep 60 & echo $! > '" + pids + "'"},
               {}, 10s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(pids_in(pids).size(), 1u);
  EXPECT_TRUE(eventually([&] { return !alive(pids_in(pids)[0]); }, 2s));
}

// Run from a terminal, the command's group owns the terminal while it runs
// (Ctrl-C reaches all of it), and baton takes the terminal back after.
TEST_F(Supervision, TerminalGoesToTheCommandAndComesBack) {
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const std::string slave = ptsname(master);
  // Fields 5 and 8 of /proc/PID/stat: process group, terminal's foreground
  // process group.
  const std::string script =
      "'" + kBaton +
      "' --store memory: run x -- sh -c "
      "\"echo inner \\$(cut -d' ' -f5,8 /proc/\\$\\$/stat)\"; "
      "echo outer $(cut -d' ' -f5,8 /proc/$$/stat)";
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    int fd = open(slave.c_str(), O_RDWR);  // the controlling terminal
    if (fd < 0) _exit(120);
    dup2(fd, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    if (fd > 2) close(fd);
    close(master);
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  std::string out;
  const auto end = Clock::now() + 10s;
  while (Clock::now() < end) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[512];
    ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO: the terminal's last user is gone
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  std::smatch inner, outer;
  ASSERT_TRUE(
      std::regex_search(out, inner, std::regex("inner ([0-9]+) ([0-9]+)")))
      << out;
  ASSERT_TRUE(
      std::regex_search(out, outer, std::regex("outer ([0-9]+) ([0-9]+)")))
      << out;
  EXPECT_EQ(inner[1], inner[2]) << "the command is not in the foreground";
  EXPECT_NE(inner[1], outer[1]) << "the command is in baton's group";
  EXPECT_EQ(outer[1], outer[2]) << "the terminal was not taken back";
}

// ---------------------------------------------------------------------------
// Durations and messages.

TEST_F(Supervision, NumbersWithoutAUnitAreRefused) {
  const std::vector<std::vector<std::string>> cases = {
      {"run", "m", "--ttl", "10", "--", "true"},
      {"run", "m", "--wait", "10", "--", "true"},
      {"run", "m", "--grace", "1", "--", "true"},
      {"--timeout", "5", "status"},
      {"acquire", "m", "--ttl", "30"},
      {"elect", "g", "--retry-interval", "100", "--", "true"},
  };
  for (const auto& args : cases) {
    std::vector<std::string> argv = {kBaton, "--store", "memory:"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 64) << args[0] << " " << args[1];
    EXPECT_THAT(r.err, HasSubstr("has no unit")) << r.err;
    EXPECT_THAT(r.err, HasSubstr("ms or 1m30s")) << r.err;
  }
  auto wait = run(
      {kBaton, "--store", "memory:", "run", "m", "--wait", "7", "--", "true"});
  EXPECT_THAT(wait.err, HasSubstr("7s, 7ms"));
  EXPECT_THAT(wait.err, HasSubstr("forever"));

  std::ofstream(file("ttl.yaml")) << "TTL: 10\n";
  auto r = run({kBaton, "--config", file("ttl.yaml"), "--store",
                "memory:", "run", "m", "--", "true"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("TTL: duration \"10\" has no unit"));

  // 0 needs no unit.
  r = run(
      {kBaton, "--store", "memory:", "run", "m", "--wait", "0", "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(Supervision, GraceMustLeaveRoomForRenewals) {
  auto r = run({kBaton, "--store", "memory:", "run", "m", "--ttl", "3s",
                "--grace", "2s", "--", "true"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("--grace 2s"));
  EXPECT_THAT(r.err, HasSubstr("--ttl 3s"));
  r = run({kBaton, "--store", "memory:", "elect", "g", "--ttl", "3s",
           "--retry-interval", "2s", "--grace", "1s", "--", "true"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("--grace 1s"));
  // The default fits any TTL.
  r = run({kBaton, "--store", "memory:", "run", "m", "--ttl", "30ms", "--",
           "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run({kBaton, "--store", "memory:", "run", "m", "--ttl", "3s", "--grace",
           "1900ms", "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(Supervision, MessagesSayWhatToDo) {
  auto r =
      run({kBaton, "--store", "memory:", "run", "m", "sh", "-c", "echo hi"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("put the command after \"--\""));
  r = run({kBaton, "--store", "memory:", "elect", "g", "sh", "-c", "echo hi"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("put the command after \"--\""));

  // Not found: 127 as in a shell, and no baton error code that says 64.
  r = run({kBaton, "--store", "memory:", "run", "m", "--",
           "baton-no-such-command"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_THAT(r.err,
              HasSubstr("cannot run \"baton-no-such-command\": command not "
                        "found"));
  EXPECT_THAT(r.err, Not(HasSubstr("invalid_argument")));
  std::ofstream(file("not-executable")) << "true\n";
  r = run(
      {kBaton, "--store", "memory:", "run", "m", "--", file("not-executable")});
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_THAT(r.err, HasSubstr("Permission denied"));
  EXPECT_THAT(r.err, Not(HasSubstr("invalid_argument")));
  // A script without "#!" runs under /bin/sh, as with execvp.
  std::ofstream(file("script")) << "exit 5\n";
  std::filesystem::permissions(file("script"),
                               std::filesystem::perms::owner_all);
  r = run({kBaton, "--store", "memory:", "run", "m", "--", file("script")});
  EXPECT_EQ(r.exit_code, 5) << r.err;

  r = run({kBaton, "--config", file("missing.yaml"), "status"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("No such file or directory"));
  EXPECT_THAT(r.err, HasSubstr("missing.yaml"));

  r = run({kBaton, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("Examples:"));
  for (const char* code : {"69", "75", "76", "77", "126", "127"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("\n  ") + code + " "))
        << "exit code " << code << " not listed";
  }
  EXPECT_THAT(r.out, HasSubstr("--timeout"));
}

}  // namespace
}  // namespace baton::testing
