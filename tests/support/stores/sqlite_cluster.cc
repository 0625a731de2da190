// tests/support/stores/sqlite_cluster.cc — kind sqlite: no server at all;
// every client opens the same database file in the given directory
// (sqlite://, src/stores/sqlite, reached by URL through the registry).
//
// The faults left are the clients' own (paused or killed, also in the
// middle of a transaction; clock steps, which must not move the store's
// CLOCK_MONOTONIC) and, with StoreOptions::disk_faults, a full disk: the
// database lives on a small tmpfs (root), which disk_fill() fills until
// disk_free(). There is no server to kill, freeze or cut off: no proxies,
// servers() == 0.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/stores/proxied.h"

namespace baton::testing {
namespace {

class SqliteCluster : public Proxied {
 public:
  SqliteCluster(const StoreOptions& o, const std::string& dir)
      : o_(o), dir_(dir + "/sqlite") {}
  ~SqliteCluster() override {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }

  bool init(std::string* error) {
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
      *error = "sqlite: mkdir " + dir_ + ": " + std::strerror(errno);
      return false;
    }
    if (o_.disk_faults) {
      if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=24m,mode=0700") ==
          0) {
        mounted_ = true;
      } else {
        mount_why_ = std::string("mount tmpfs: ") + std::strerror(errno) +
                     " (needs root / CAP_SYS_ADMIN)";
      }
    }
    return true;
  }

  std::string direct_url() const override {
    return "sqlite://" + dir_ + "/locks.db";
  }
  std::string pg_conninfo() const override { return ""; }
  int servers() const override { return 0; }
  void kill9(int) override {}
  bool restart(int, std::string*) override { return true; }
  bool freeze(bool, std::string* why) override {
    if (why != nullptr) *why = "sqlite:// has no server to stop";
    return false;
  }
  bool fiu_enable(const std::string&, std::string* why) override {
    *why = "fiu faults are batond's only (it runs under fiu-run)";
    return false;
  }
  void fiu_disable(const std::string&) override {}
  bool disk_fill(std::string* why) override {
    if (!mounted_) {
      *why = mount_why_;
      return false;
    }
    const int fd = ::open((dir_ + "/filler").c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      *why = std::string("open filler: ") + std::strerror(errno);
      return false;
    }
    const std::vector<char> zeros(1 << 16, 0);
    for (;;) {
      if (::write(fd, zeros.data(), zeros.size()) <= 0) break;
    }
    ::close(fd);
    return true;
  }
  void disk_free() override {
    if (mounted_) ::unlink((dir_ + "/filler").c_str());
  }

 private:
  StoreOptions o_;
  std::string dir_;
  bool mounted_ = false;
  std::string mount_why_ = "disk faults off";
};

}  // namespace

std::unique_ptr<StoreCluster> start_sqlite(const StoreOptions& options,
                                           const std::string& dir,
                                           std::string* error) {
  return opened(std::make_unique<SqliteCluster>(options, dir), error);
}

}  // namespace baton::testing
