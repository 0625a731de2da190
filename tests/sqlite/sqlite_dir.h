// tests/sqlite/sqlite_dir.h — a temp dir for sqlite:// test databases,
// removed at exit (the sqlite store has no server to start).
#ifndef BATON_TESTS_SQLITE_SQLITE_DIR_H_
#define BATON_TESTS_SQLITE_SQLITE_DIR_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace baton::testing {

class SqliteDir {
 public:
  // In `base` (default: the temp directory, normally on disk).
  explicit SqliteDir(
      std::filesystem::path base = std::filesystem::temp_directory_path()) {
    std::string tmpl = (base / "baton-sqlite-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
    owner_ = ::getpid();
  }
  ~SqliteDir() {
    if (::getpid() != owner_) return;  // a forked child leaves it alone
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  SqliteDir(const SqliteDir&) = delete;
  SqliteDir& operator=(const SqliteDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string url(const std::string& name) const {
    return "sqlite://" + file(name);
  }

 private:
  std::string path_;
  pid_t owner_ = 0;
};

// A directory on tmpfs (/dev/shm) when the machine has a writable one, else
// the temp directory: for tests of the contract's meaning, where an fsync
// on a real disk adds only time (16,000 commits in rule 1).
inline std::filesystem::path memory_backed_dir() {
  const std::filesystem::path shm = "/dev/shm";
  std::error_code ec;
  if (std::filesystem::is_directory(shm, ec) &&
      ::access(shm.c_str(), W_OK) == 0) {
    return shm;
  }
  return std::filesystem::temp_directory_path();
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SQLITE_SQLITE_DIR_H_
