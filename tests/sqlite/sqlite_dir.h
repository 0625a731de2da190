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
  SqliteDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "baton-sqlite-XXXXXX")
            .string();
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

}  // namespace baton::testing

#endif  // BATON_TESTS_SQLITE_SQLITE_DIR_H_
