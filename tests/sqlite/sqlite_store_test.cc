// tests/sqlite/sqlite_store_test.cc — what is particular to sqlite://:
// URL forms and settings, bad files (each refused naming the path, nothing
// overwritten), the schema racing 8 processes, 8 forked workers handing a
// lock off, kill -9 of a holder mid-transaction, dead waiters leaving the
// queue, the boot-id rule, the inotify bell, a schema version 1 file
// migrated by 8 processes at once, and a wall-clock step
// (libfaketime) that changes nothing.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "baton/counter.h"
#include "sqlite_dir.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using testing::SqliteDir;

SqliteDir& dir() {
  static SqliteDir d;  // removed at exit
  return d;
}

std::string unique(const std::string& what) {
  static std::atomic<int> n{0};
  return "sqtest/" + std::to_string(::getpid()) + "/" + what + "/" +
         std::to_string(n.fetch_add(1));
}

AcquireOptions opts(std::chrono::milliseconds ttl, std::string label = "") {
  AcquireOptions o;
  o.ttl = ttl;
  o.label = std::move(label);
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs one SQL statement on `path` directly (no store), returning the first
// column of the first row.
std::string sql(const std::string& path, const std::string& stmt) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return "open failed";
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, stmt.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      out = std::string("error: ") + sqlite3_errmsg(db);
    }
    sqlite3_finalize(st);
  } else {
    out = std::string("error: ") + sqlite3_errmsg(db);
  }
  sqlite3_close(db);
  return out;
}

// Forks `fn` in a child that exits with its return value.
pid_t spawn(const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Forks `n` processes that open `path` at the same instant and run `fn` on
// their client (its return value is the exit code; 1: the open failed, 4:
// the start signal was lost); returns the exit codes.
std::vector<int> open_at_once(int n, const std::string& path,
                              const std::function<int(Client&)>& fn) {
  int go[2];
  if (::pipe(go) != 0) return {};
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    kids.push_back(spawn([&] {
      ::close(go[1]);
      char b;
      if (::read(go[0], &b, 1) != 0) return 4;
      auto c = Client::open("sqlite://" + path);
      if (!c.ok()) {
        std::fprintf(stderr, "open: %s\n", c.error().to_string().c_str());
        return 1;
      }
      return fn(*c);
    }));
  }
  ::close(go[0]);
  ::close(go[1]);  // all children start now
  std::vector<int> codes;
  for (pid_t k : kids) codes.push_back(wait_exit(k));
  return codes;
}

TEST(SqliteUrl, FormsAndSettings) {
  auto abs = Client::open(dir().url("forms.db"));
  ASSERT_TRUE(abs.ok()) << abs.error().to_string();
  auto opaque = Client::open("sqlite:" + dir().file("forms.db"));
  ASSERT_TRUE(opaque.ok()) << opaque.error().to_string();
  const std::string rel =
      std::filesystem::relative(dir().file("forms.db")).string();
  // The spellings of the options before the shared vocabulary still work.
  auto relative = Client::open(
      "sqlite://./" + rel + "?RequestTimeout=2s&recheck_max=50ms&max_idle=4");
  ASSERT_TRUE(relative.ok()) << rel << ": " << relative.error().to_string();
  // All three reach the same file.
  const std::string name = unique("forms");
  auto held = abs->try_acquire(name, opts(10s, "abs"));
  ASSERT_TRUE(held.ok());
  auto info = relative->describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "abs");
  EXPECT_FALSE(opaque->try_acquire(name, opts(1s)).ok());
}

TEST(SqliteUrl, BadSettingsAreRefusedNamingThem) {
  auto c = Client::open(dir().url("bad.db") + "?colour=blue");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::invalid_argument);
  EXPECT_NE(c.error().message().find("colour"), std::string::npos)
      << c.error().message();
  c = Client::open(dir().url("bad.db") + "?request_timeout=soon");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("request_timeout"), std::string::npos);
  c = Client::open(dir().url("bad.db") + "?prefix=Bad-Prefix");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("prefix"), std::string::npos);
  c = Client::open("sqlite://u:secret@db:3306/x");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::invalid_argument);
  EXPECT_NE(c.error().message().find("file path"), std::string::npos);
  EXPECT_EQ(c.error().message().find("secret"), std::string::npos);
  // None of these created the file.
  EXPECT_FALSE(std::filesystem::exists(dir().file("bad.db")));
}

TEST(SqliteFiles, MissingDirectoryIsNamed) {
  const std::string path = dir().file("no/such/dir/x.db");
  auto c = Client::open("sqlite://" + path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::invalid_argument);
  EXPECT_NE(c.error().message().find(path), std::string::npos)
      << c.error().message();
  EXPECT_NE(c.error().message().find("does not exist"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir().file("no")));
}

TEST(SqliteFiles, NotADatabaseIsNamedAndLeftUntouched) {
  const std::string path = dir().file("notes.txt");
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "these are my notes, line " + std::to_string(i) + "\n";
  std::ofstream(path) << text;
  auto c = Client::open("sqlite://" + path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::invalid_argument);
  EXPECT_NE(c.error().message().find(path), std::string::npos)
      << c.error().message();
  EXPECT_NE(c.error().message().find("not a SQLite database"),
            std::string::npos)
      << c.error().message();
  EXPECT_EQ(read_file(path), text);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST(SqliteFiles, NewerSchemaVersionIsRefusedAndLeftUntouched) {
  const std::string path = dir().file("newer.db");
  {
    auto c = Client::open("sqlite://" + path);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
  }
  ASSERT_EQ(sql(path,
                "INSERT INTO baton_schema_version VALUES (99, 0) "
                "RETURNING version"),
            "99");
  ASSERT_EQ(sql(path, "PRAGMA wal_checkpoint(TRUNCATE)"), "0");
  const std::string before = read_file(path);
  auto c = Client::open("sqlite://" + path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find(path), std::string::npos)
      << c.error().message();
  EXPECT_NE(c.error().message().find("version 99"), std::string::npos)
      << c.error().message();
  EXPECT_EQ(sql(path, "SELECT COUNT(*) FROM baton_schema_version"), "2");
  EXPECT_EQ(read_file(path), before);
}

TEST(SqliteFiles, ReadOnlyFileIsNamedAndLeftUntouched) {
  const std::string path = dir().file("readonly.db");
  {
    auto c = Client::open("sqlite://" + path);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    ASSERT_TRUE(c->try_acquire(unique("ro"), opts(60s)).ok());
  }
  ASSERT_EQ(sql(path, "PRAGMA wal_checkpoint(TRUNCATE)"), "0");
  ::chmod(path.c_str(), 0444);
  ::chmod(dir().path().c_str(), 0755);
  const std::string before = read_file(path);
  // root ignores file modes: the check runs as nobody when we are root.
  const pid_t pid = spawn([&] {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      return 3;
    }
    auto c = Client::open("sqlite://" + path);
    if (c.ok()) return 1;
    if (c.error().message().find(path) == std::string::npos) return 2;
    std::fprintf(stderr, "read-only: %s\n", c.error().to_string().c_str());
    return 0;
  });
  EXPECT_EQ(wait_exit(pid), 0);
  EXPECT_EQ(read_file(path), before);
  ::chmod(path.c_str(), 0644);
}

// 8 processes open a fresh file at the same instant: one schema, no error.
TEST(SqliteSchema, EightProcessesCreateItAtOnce) {
  static int run = 0;  // a fresh file per run (--gtest_repeat)
  const std::string path = dir().file("race" + std::to_string(run++) + ".db");
  const auto codes = open_at_once(8, path, [](Client& c) {
    auto l = c.acquire("race", 10s, opts(5s));
    if (!l.ok()) return 2;
    return c.release(*l).ok() ? 0 : 3;
  });
  EXPECT_EQ(codes, std::vector<int>(8, 0));
  EXPECT_EQ(sql(path, "SELECT COUNT(*) FROM baton_schema_version"), "1");
  EXPECT_EQ(sql(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(sql(path,
                "SELECT last_fencing FROM baton_locks WHERE name = "
                "CAST('race' AS BLOB)"),
            "8");
}

// A file made by schema version 1 (no mode column; made here by dropping
// the column version 2 added, which leaves version 1's tables) opened by 8
// processes at once: one migration, no error, the old lease kept (as
// exclusive), and shared mode works on it.
TEST(SqliteSchema, EightProcessesMigrateAVersion1FileAtOnce) {
  static int run = 0;  // a fresh file per run (--gtest_repeat)
  const std::string path = dir().file("v1-" + std::to_string(run++) + ".db");
  const std::string held = unique("v1-held");
  std::uint64_t first = 0;
  {
    auto c = Client::open("sqlite://" + path);
    ASSERT_TRUE(c.ok());
    auto l = c->try_acquire(held, opts(3600s, "old"));
    ASSERT_TRUE(l.ok());
    first = l->fencing_token;  // kept: the Client ends holding it
  }
  for (const char* stmt : {"ALTER TABLE baton_holders DROP COLUMN shared",
                           "ALTER TABLE baton_queue DROP COLUMN shared",
                           "DELETE FROM baton_schema_version",
                           "INSERT INTO baton_schema_version VALUES (1, 0)"}) {
    ASSERT_EQ(sql(path, stmt), "") << stmt;
  }
  ASSERT_EQ(sql(path,
                "SELECT COUNT(*) FROM pragma_table_info('baton_holders') "
                "WHERE name = 'shared'"),
            "0");
  const auto codes = open_at_once(8, path, [&](Client& c) {
    auto other = c.try_acquire(held, opts(5s));
    if (other.ok() || other.error().code() != Errc::not_acquired) return 2;
    auto l = c.acquire_shared(held + "/readers", 10s, opts(5s));
    if (!l.ok() || !l->shared) return 3;
    return c.release(*l).ok() ? 0 : 5;
  });
  EXPECT_EQ(codes, std::vector<int>(8, 0));
  EXPECT_EQ(sql(path,
                "SELECT group_concat(version) FROM "
                "baton_schema_version"),
            "1,2");
  for (const char* t : {"baton_holders", "baton_queue"}) {
    EXPECT_EQ(
        sql(path, std::string("SELECT COUNT(*) FROM pragma_table_info('") + t +
                      "') WHERE name = 'shared'"),
        "1")
        << t;
  }
  auto c = Client::open("sqlite://" + path);
  ASSERT_TRUE(c.ok());
  auto info = c->describe(held);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, first);
  EXPECT_EQ(info->holders[0].label, "old");
  EXPECT_FALSE(info->holders[0].shared);
  auto r = c->acquire_shared(held, 0ms, opts(5s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::not_acquired);
}

// The unique-index lock is in the tables: a second holder row for a
// taken (name, slot) is refused by SQLite itself, whatever a scheduler
// decided.
TEST(SqliteSchema, UniqueNameSlotRefusesASecondHolder) {
  const std::string path = dir().file("unique.db");
  auto c = Client::open("sqlite://" + path);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->try_acquire("unique-slot", opts(60s)).ok());
  const std::string dup =
      sql(path,
          "INSERT INTO baton_holders (name, slot, token, fencing, ttl_ms, "
          "granted_us, expires_us, holds, label, rkey, aliases) SELECT name, "
          "slot, X'00', fencing + 1, ttl_ms, granted_us, expires_us, 1, label, "
          "rkey, aliases FROM baton_holders WHERE name = CAST('unique-slot' AS "
          "BLOB)");
  EXPECT_NE(dup.find("UNIQUE constraint failed"), std::string::npos) << dup;
  EXPECT_EQ(sql(path,
                "SELECT COUNT(*) FROM baton_holders WHERE name = "
                "CAST('unique-slot' AS BLOB)"),
            "1");
}

// 8 forked workers take one lock in turn: never two inside, fencing tokens
// strictly increasing, every acquisition granted.
TEST(SqliteProcesses, EightWorkersHandOffOneLock) {
  const std::string url = dir().url("handoff.db");
  const std::string name = unique("handoff");
  struct Shared {
    std::atomic<int> inside;
    std::atomic<int> overlaps;
    std::atomic<std::uint64_t> last_token;
    std::atomic<int> regressions;
    std::atomic<int> grants;
  };
  void* mem = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* sh = new (mem) Shared{};
  constexpr int kRounds = 25;
  std::vector<pid_t> kids;
  for (int w = 0; w < 8; ++w) {
    kids.push_back(spawn([&] {
      auto c = Client::open(url);
      if (!c.ok()) return 1;
      for (int i = 0; i < kRounds; ++i) {
        auto l = c->acquire(name, 30s, opts(10s));
        if (!l.ok()) return 2;
        if (sh->inside.fetch_add(1) != 0) sh->overlaps.fetch_add(1);
        if (l->fencing_token <= sh->last_token.load()) {
          sh->regressions.fetch_add(1);
        }
        sh->last_token.store(l->fencing_token);
        sh->grants.fetch_add(1);
        std::this_thread::sleep_for(200us);
        sh->inside.fetch_sub(1);
        if (!c->release(*l).ok()) return 3;
      }
      return 0;
    }));
  }
  for (pid_t k : kids) EXPECT_EQ(wait_exit(k), 0);
  EXPECT_EQ(sh->overlaps.load(), 0);
  EXPECT_EQ(sh->regressions.load(), 0);
  EXPECT_EQ(sh->grants.load(), 8 * kRounds);
  EXPECT_EQ(sh->last_token.load(), 8u * kRounds);
  ::munmap(mem, sizeof(Shared));
}

// A holder killed with SIGKILL in the middle of its transactions: the file
// stays consistent and the lock is free again once its lease expires.
TEST(SqliteProcesses, KillNineMidTransactionLeavesTheDatabaseConsistent) {
  const std::string path = dir().file("kill9.db");
  const std::string name = unique("kill9");
  for (int round = 0; round < 5; ++round) {
    const pid_t pid = spawn([&] {
      auto c = Client::open("sqlite://" + path);
      if (!c.ok()) return 1;
      for (;;) {
        auto l = c->acquire(name, 5s, opts(500ms));
        if (l.ok()) (void)c->extend(*l, 600ms);
        (void)c->counter(name).add(1);
        if (l.ok()) (void)c->release(*l);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + 37 * round));
    ::kill(pid, SIGKILL);
    EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  }
  EXPECT_EQ(sql(path, "PRAGMA integrity_check"), "ok");
  auto c = Client::open("sqlite://" + path);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto l = c->acquire(name, 5s, opts(5s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  auto info = c->describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->last_fencing_token, l->fencing_token);
  EXPECT_EQ(sql(path, "SELECT COUNT(*) FROM baton_holders"), "1");
}

// A waiter whose process died leaves the queue within about waiter_timeout.
TEST(SqliteProcesses, DeadWaiterLeavesTheQueue) {
  const std::string url = dir().url("deadwaiter.db") + "?waiter_timeout=1s";
  const std::string name = unique("deadwaiter");
  auto c = Client::open(url);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto held = c->try_acquire(name, opts(60s, "holder"));
  ASSERT_TRUE(held.ok());
  const pid_t pid = spawn([&] {
    auto w = Client::open(url);
    if (!w.ok()) return 1;
    (void)w->acquire(name, 60s, opts(5s, "doomed"));
    return 0;
  });
  bool queued = false;
  for (int i = 0; i < 200 && !queued; ++i) {
    auto info = c->describe(name);
    queued = info.ok() && info->waiters.size() == 1;
    if (!queued) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(queued);
  ::kill(pid, SIGKILL);
  wait_exit(pid);
  const auto killed = std::chrono::steady_clock::now();
  bool gone = false;
  while (!gone && std::chrono::steady_clock::now() - killed < 5s) {
    auto info = c->describe(name);
    gone = info.ok() && info->waiters.empty();
    if (!gone) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(gone);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 2500ms);
  // The lock is handed to the next live waiter, not to the dead one.
  std::thread next([&] {
    auto w = Client::open(url);
    ASSERT_TRUE(w.ok());
    auto l = w->acquire(name, 10s, opts(5s, "next"));
    EXPECT_TRUE(l.ok());
  });
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(c->release(*held).ok());
  next.join();
}

// With the fallback re-check at 10 s, a waiter in another process still gets
// the lock at once after a release: the inotify bell woke it.
TEST(SqliteWake, ReleaseWakesAWaiterInAnotherProcess) {
  const std::string url = dir().url("bell.db") + "?recheck_interval=10s";
  const std::string name = unique("bell");
  auto c = Client::open(url);
  ASSERT_TRUE(c.ok());
  auto held = c->try_acquire(name, opts(60s));
  ASSERT_TRUE(held.ok());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = spawn([&] {
    auto w = Client::open(url);
    if (!w.ok()) return 1;
    (void)!::write(ready[1], "x", 1);
    const auto t0 = std::chrono::steady_clock::now();
    auto l = w->acquire(name, 30s, opts(5s));
    if (!l.ok()) return 2;
    // Granted within 3 s of waiting (the release comes after ~300 ms).
    return std::chrono::steady_clock::now() - t0 < 3s ? 0 : 3;
  });
  char b;
  ASSERT_EQ(::read(ready[0], &b, 1), 1);
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(c->release(*held).ok());
  EXPECT_EQ(wait_exit(pid), 0);
  ::close(ready[0]);
  ::close(ready[1]);
}

// A new boot id in the file: every lease and queued request has expired;
// fencing tokens and counters continue.
TEST(SqliteClock, NewBootIdExpiresEveryLease) {
  const std::string path = dir().file("boot.db");
  const std::string name = unique("boot");
  std::uint64_t first = 0;
  {
    auto c = Client::open("sqlite://" + path);
    ASSERT_TRUE(c.ok());
    auto l = c->try_acquire(name, opts(3600s));
    ASSERT_TRUE(l.ok());
    first = l->fencing_token;
    ASSERT_TRUE(c->counter("boot-counter").add(7).ok());
    // Leases outlive their Client only when not released: it goes out of
    // scope holding it.
  }
  EXPECT_EQ(sql(path, "SELECT COUNT(*) FROM baton_holders"), "1");
  ASSERT_EQ(sql(path,
                "UPDATE baton_meta SET value = 'another-boot' WHERE "
                "key = 'boot_id' RETURNING value"),
            "another-boot");
  auto c = Client::open("sqlite://" + path);
  ASSERT_TRUE(c.ok());
  auto l = c->try_acquire(name, opts(10s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_GT(l->fencing_token, first);
  EXPECT_EQ(*c->counter("boot-counter").get(), 7);
}

#ifdef BATON_CLI_PATH
[[maybe_unused]] std::string sh(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

[[maybe_unused]] std::int64_t json_int(const std::string& out,
                                       const std::string& key) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) {
    return -1;
  }
  return std::stoll(m[1]);
}
#endif

// A wall clock stepped far off (libfaketime, monotonic clocks faked too)
// changes nothing: `baton` a year ahead and a day behind sees this process's
// lease end when the host's monotonic clock says so.
TEST(SqliteClock, WallClockStepChangesNothing) {
#ifndef BATON_CLI_PATH
  GTEST_SKIP() << "needs the baton CLI (configure with BATON_WITH_SERVER=ON)";
#elif defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "an AddressSanitizer build of the CLI refuses libfaketime "
                  "in LD_PRELOAD (ASan's runtime must come first)";
#else
  const std::string lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
  if (!std::filesystem::exists(lib)) {
    GTEST_SKIP() << "libfaketime missing; install Debian's faketime package";
  }
  auto faked = [&](const std::string& shift) {
    return "env LD_PRELOAD=" + lib + " FAKETIME='" + shift + "' ";
  };
  int st = 0;
  const std::string year = sh(faked("+365d") + "date +%Y", &st);
  if (std::stoi(year) < 2000) GTEST_SKIP() << "faketime did not run";
  const std::string url = dir().url("faketime.db");
  auto c = Client::open(url);
  ASSERT_TRUE(c.ok());
  const std::string name = unique("faketime");
  auto held = c->try_acquire(name, opts(3s, "in-process"));
  ASSERT_TRUE(held.ok());
  const auto t0 = std::chrono::steady_clock::now();
  const std::string baton = std::string(BATON_CLI_PATH) + " --store '" + url +
                            "' acquire " + name + " --ttl 2s --json";
  std::string out = sh(faked("+365d") + baton, &st);
  EXPECT_EQ(WEXITSTATUS(st), 75)
      << "a year ahead, the lease still runs: " << out;
  out = sh(faked("-1d") + baton + " --wait 30s", &st);
  ASSERT_EQ(WEXITSTATUS(st), 0) << out;
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 2900ms) << "granted before the lease's 3 s ran out";
  EXPECT_LT(waited, 8s) << out;
  EXPECT_GT(json_int(out, "fencing_token"),
            static_cast<std::int64_t>(held->fencing_token))
      << out;
#endif
}

}  // namespace
}  // namespace baton
