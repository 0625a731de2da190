// tests/sqlite/sqlite_files_test.cc — sqlite://'s files are private and a
// database other users could write or replace is refused
// (src/stores/sqlite/files.h): every file the store or SQLite makes has
// file_mode (0600; 0660 when asked) under umask 0 and 022; a world-writable
// database, a world-writable or sticky directory, a world-writable
// ancestor, a file beside that is a symbolic link, another user's file or
// directory, and a bad file_mode are each refused naming the path and its
// mode, with nothing created or changed; allow_insecure_files=1 accepts
// them.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "baton/client.h"
#include "sqlite_dir.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using testing::SqliteDir;

constexpr uid_t kNobody = 65534;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

AcquireOptions opts(std::chrono::milliseconds ttl) {
  AcquireOptions o;
  o.ttl = ttl;
  return o;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

// Every entry of `dir` (name -> permission bits).
std::map<std::string, mode_t> modes_in(const std::string& dir) {
  std::map<std::string, mode_t> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out[e.path().filename().string()] = mode_of(e.path().string());
  }
  return out;
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& [name, mode] : modes_in(dir)) out.insert(name);
  return out;
}

// Sets the umask for one scope.
struct Umask {
  explicit Umask(mode_t m) : old(::umask(m)) {}
  ~Umask() { ::umask(old); }
  mode_t old;
};

// A full cycle: acquire, extend, release, and a held lease, so that the
// WAL, the shared memory and the bell file all exist when the caller
// looks (the client stays open).
void cycle(Client& c) {
  auto l = c.try_acquire("files/cycle", opts(10s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  auto e = c.extend(*l, 20s);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  auto r = c.release(*e);
  ASSERT_TRUE(r.ok() && *r);
  ASSERT_TRUE(c.try_acquire("files/held", opts(30s)).ok());
}

// Every file in `d` after a cycle through `query` has `want`; the WAL,
// shared memory and bell file are among them.
void expect_modes_after_cycle(const SqliteDir& d, const std::string& query,
                              mode_t want) {
  auto c = Client::open(d.url("locks.db") + query);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  cycle(*c);
  const auto modes = modes_in(d.path());
  for (const char* f :
       {"locks.db", "locks.db-wal", "locks.db-shm", "locks.db-baton-bell"}) {
    EXPECT_TRUE(modes.count(f)) << f << " was not made";
  }
  for (const auto& [name, mode] : modes) {
    EXPECT_EQ(mode, want) << name << " has mode 0" << std::oct << mode;
  }
}

TEST(SqliteFileModes, AllFilesAre0600UnderUmask0) {
  SqliteDir d;
  Umask u(0);
  expect_modes_after_cycle(d, "", 0600);
}

TEST(SqliteFileModes, AllFilesAre0600UnderUmask022) {
  SqliteDir d;
  Umask u(022);
  expect_modes_after_cycle(d, "", 0600);
}

TEST(SqliteFileModes, FileMode0660GivesTheGroupEveryFile) {
  SqliteDir d;
  ASSERT_EQ(::chmod(d.path().c_str(), 0770), 0);  // the group's directory
  Umask u(022);  // would take the group's write bit off: put back
  expect_modes_after_cycle(d, "?file_mode=0660", 0660);
}

TEST(SqliteFileModes, FileMode0660UnderUmask0) {
  SqliteDir d;
  Umask u(0);
  expect_modes_after_cycle(d, "?file_mode=660", 0660);
}

// SQLite makes its rollback journal (as its -wal and -shm) with the
// database's mode, past the umask: the store relies on it for the files it
// does not create itself. The store only uses WAL mode, so the journal is
// made here by switching a store's database to PERSIST.
TEST(SqliteFileModes, SqliteGivesItsJournalTheDatabasesMode) {
  SqliteDir d;
  Umask u(0);
  {
    auto c = Client::open(d.url("locks.db") + "?file_mode=0640");
    ASSERT_TRUE(c.ok()) << c.error().to_string();
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(d.file("locks.db").c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db,
                         "PRAGMA journal_mode=PERSIST;"
                         "CREATE TABLE t (x);INSERT INTO t VALUES (1)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  ASSERT_TRUE(std::filesystem::exists(d.file("locks.db-journal")));
  for (const auto& [name, mode] : modes_in(d.path())) {
    EXPECT_EQ(mode, 0640u) << name << " has mode 0" << std::oct << mode;
  }
}

// A database an older build made 0644 (its bell 0644 too) is brought to
// file_mode once it has opened: the owner tokens stop being readable.
TEST(SqliteFileModes, AnOlder0644DatabaseIsMadePrivate) {
  SqliteDir d;
  {
    auto c = Client::open(d.url("locks.db"));
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    ASSERT_TRUE(c->try_acquire("files/old", opts(30s)).ok());
  }
  ASSERT_EQ(::chmod(d.file("locks.db").c_str(), 0644), 0);
  ASSERT_EQ(::chmod(d.file("locks.db-baton-bell").c_str(), 0644), 0);
  auto c = Client::open(d.url("locks.db"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  cycle(*c);
  for (const auto& [name, mode] : modes_in(d.path())) {
    EXPECT_EQ(mode, 0600u) << name << " has mode 0" << std::oct << mode;
  }
}

// Makes a database with a lease in it, then closes it (its -wal and -shm
// are gone with the last connection).
void make_db(const SqliteDir& d) {
  auto c = Client::open(d.url("locks.db"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  ASSERT_TRUE(c->try_acquire("files/made", opts(60s)).ok());
}

void expect_refused(const Result<Client>& c,
                    std::initializer_list<std::string> parts) {
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::permission_denied);
  for (const std::string& p : parts) {
    EXPECT_NE(c.error().message().find(p), std::string::npos)
        << "no \"" << p << "\" in: " << c.error().message();
  }
}

TEST(SqliteFileRefusals, AWorldWritableDatabaseIsRefusedUntouched) {
  SqliteDir d;
  make_db(d);
  const std::string db = d.file("locks.db");
  ASSERT_EQ(::chmod(db.c_str(), 0666), 0);
  struct stat before {};
  ASSERT_EQ(::stat(db.c_str(), &before), 0);
  const std::string bytes = read_file(db);
  const auto names = names_in(d.path());
  auto c = Client::open(d.url("locks.db"));
  expect_refused(c, {"sqlite database \"" + db + "\": the file \"" + db +
                         "\" has mode 0666: other users could write it",
                     "allow_insecure_files=1", "nothing was changed"});
  struct stat after {};
  ASSERT_EQ(::stat(db.c_str(), &after), 0);
  EXPECT_EQ(read_file(db), bytes);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(names_in(d.path()), names);  // no -wal, -shm or new bell

  // Knowingly: opened, and left 0666.
  auto ok = Client::open(d.url("locks.db") + "?allow_insecure_files=1");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  cycle(*ok);
  EXPECT_EQ(mode_of(db), 0666u);
}

TEST(SqliteFileRefusals, AGroupWritableDatabaseNeedsFileMode0660) {
  SqliteDir d;
  make_db(d);
  const std::string db = d.file("locks.db");
  ASSERT_EQ(::chmod(db.c_str(), 0660), 0);
  expect_refused(Client::open(d.url("locks.db")),
                 {"\"" + db + "\" has mode 0660: its group could write it",
                  "file_mode=0660"});
  EXPECT_EQ(mode_of(db), 0660u);
  auto ok = Client::open(d.url("locks.db") + "?file_mode=0660");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
}

TEST(SqliteFileRefusals, AWorldWritableDirectoryIsRefusedAndNothingMade) {
  SqliteDir d;
  ASSERT_EQ(::chmod(d.path().c_str(), 0777), 0);
  auto c = Client::open(d.url("locks.db"));
  expect_refused(c, {"sqlite database \"" + d.file("locks.db") +
                         "\": the directory \"" + d.path() +
                         "\" has mode 0777: other users could replace the "
                         "database",
                     "allow_insecure_files=1"});
  EXPECT_TRUE(names_in(d.path()).empty());

  auto ok = Client::open(d.url("locks.db") + "?allow_insecure_files=1");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  cycle(*ok);
  // Accepted knowingly; the files are still made with file_mode.
  for (const auto& [name, mode] : modes_in(d.path())) {
    EXPECT_EQ(mode, 0600u) << name;
  }
}

// /tmp's case: sticky stops others renaming a file, not creating
// <db>-wal or <db>-shm before the store does.
TEST(SqliteFileRefusals, AStickyWorldWritableDirectoryIsRefused) {
  SqliteDir d;
  ASSERT_EQ(::chmod(d.path().c_str(), 01777), 0);
  expect_refused(Client::open(d.url("locks.db")),
                 {"the directory \"" + d.path() + "\" has mode 1777",
                  "could create the database's -wal, -shm or bell file"});
  EXPECT_TRUE(names_in(d.path()).empty());
}

TEST(SqliteFileRefusals, AGroupWritableDirectoryNeedsFileMode0660) {
  SqliteDir d;
  ASSERT_EQ(::chmod(d.path().c_str(), 0770), 0);
  expect_refused(Client::open(d.url("locks.db")),
                 {"the directory \"" + d.path() + "\" has mode 0770",
                  "its group could replace the database"});
  EXPECT_TRUE(names_in(d.path()).empty());
  auto ok = Client::open(d.url("locks.db") + "?file_mode=0660");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
}

// Anyone could rename the database's directory away and put theirs there.
TEST(SqliteFileRefusals, AWorldWritableAncestorIsRefused) {
  SqliteDir d;
  const std::string inner = d.file("inner");
  ASSERT_EQ(::mkdir(inner.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(d.path().c_str(), 0777), 0);
  expect_refused(Client::open("sqlite://" + inner + "/locks.db"),
                 {"the directory \"" + d.path() + "\" has mode 0777",
                  "rename what it holds"});
  EXPECT_TRUE(names_in(inner).empty());
  // Sticky, it is fine (as /tmp is for a private directory in it).
  ASSERT_EQ(::chmod(d.path().c_str(), 01777), 0);
  auto ok = Client::open("sqlite://" + inner + "/locks.db");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
}

// A file beside the database made in advance: a symbolic link (which SQLite
// would write through) or one others may write.
TEST(SqliteFileRefusals, AFileBesideThatOthersCouldUseIsRefused) {
  SqliteDir d;
  const std::string target = d.file("elsewhere");
  std::ofstream(target) << "not yours";
  ASSERT_EQ(::symlink(target.c_str(), d.file("locks.db-wal").c_str()), 0);
  expect_refused(
      Client::open(d.url("locks.db")),
      {"the file \"" + d.file("locks.db-wal") + "\" is a symbolic link"});
  EXPECT_FALSE(std::filesystem::exists(d.file("locks.db")));
  EXPECT_EQ(read_file(target), "not yours");
  ASSERT_EQ(::unlink(d.file("locks.db-wal").c_str()), 0);

  const std::string bell = d.file("locks.db-baton-bell");
  std::ofstream(bell) << "12345678";
  ASSERT_EQ(::chmod(bell.c_str(), 0666), 0);
  expect_refused(Client::open(d.url("locks.db")),
                 {"the file \"" + bell + "\" has mode 0666"});
  EXPECT_FALSE(std::filesystem::exists(d.file("locks.db")));
}

// Ownership needs another user: as root (CI), chown to nobody.
TEST(SqliteFileRefusals, AnotherUsersDatabaseOrDirectoryIsRefused) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to give a file to another user (nobody, uid "
                 << kNobody << "); CI runs the tests as root";
  }
  SqliteDir d;
  make_db(d);
  const std::string db = d.file("locks.db");
  const std::string bytes = read_file(db);
  ASSERT_EQ(::chown(db.c_str(), kNobody, kNobody), 0);
  expect_refused(
      Client::open(d.url("locks.db")),
      {"the file \"" + db + "\" is owned by ",
       "(uid 65534), not by root: its owner could change it", "chown it"});
  EXPECT_EQ(read_file(db), bytes);
  {
    auto ok = Client::open(d.url("locks.db") + "?allow_insecure_files=1");
    ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  }

  SqliteDir other;
  ASSERT_EQ(::chown(other.path().c_str(), kNobody, kNobody), 0);
  expect_refused(Client::open(other.url("locks.db")),
                 {"the directory \"" + other.path() + "\" is owned by ",
                  "(uid 65534), not by root: its owner could replace",
                  "its owner could replace the database"});
  EXPECT_TRUE(names_in(other.path()).empty());
}

TEST(SqliteFileRefusals, BadFileModesAreRefusedBeforeAnyFile) {
  SqliteDir d;
  const std::map<std::string, std::string> bad = {
      {"0755", "no execute bits"},    {"0644", "other users"},
      {"0666", "other users"},        {"0400", "owner read and write"},
      {"rw", "three octal digits"},   {"10600", "three octal digits"},
      {"0690", "three octal digits"},
  };
  for (const auto& [mode, why] : bad) {
    auto c = Client::open(d.url("locks.db") + "?file_mode=" + mode);
    ASSERT_FALSE(c.ok()) << mode;
    EXPECT_EQ(c.error().code(), Errc::invalid_argument) << mode;
    EXPECT_NE(c.error().message().find("file_mode \"" + mode + "\""),
              std::string::npos)
        << c.error().message();
    EXPECT_NE(c.error().message().find(why), std::string::npos)
        << c.error().message();
  }
  EXPECT_TRUE(names_in(d.path()).empty());
  // Bits for others only knowingly.
  auto ok = Client::open(d.url("locks.db") +
                         "?file_mode=0664&allow_insecure_files=1");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_EQ(mode_of(d.file("locks.db")), 0664u);
}

}  // namespace
}  // namespace baton
