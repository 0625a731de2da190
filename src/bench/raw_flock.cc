// bench/raw_flock.cc — raw-flock:// (see raw_flock.h).
#include "bench/raw_flock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace baton::bench {
namespace {

// Clients of this process blocked in acquire, per lock file.
std::atomic<int>& blocked(const std::string& path) {
  static std::mutex mu;
  static auto* m = new std::map<std::string, std::atomic<int>>();
  std::lock_guard<std::mutex> lk(mu);
  return (*m)[path];
}

class FlockSession final : public Session {
 public:
  explicit FlockSession(std::string dir) : dir_(std::move(dir)) {}
  ~FlockSession() override {
    for (auto& [path, fd] : fds_) ::close(fd);
  }

  Status try_acquire(const std::string& name) override {
    auto fd = fd_of(name);
    if (!fd) return fd.error();
    if (::flock(*fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        return Error(Errc::not_acquired, "flock: " + name + " is held");
      }
      return Error(Errc::unavailable,
                   std::string("flock: ") + std::strerror(errno));
    }
    held_ = *fd;
    return {};
  }
  Status acquire(const std::string& name, milliseconds) override {
    auto fd = fd_of(name);
    if (!fd) return fd.error();
    if (::flock(*fd, LOCK_EX | LOCK_NB) != 0) {
      auto& b = blocked(path_of(name));
      b.fetch_add(1);
      int rc;
      do {
        rc = ::flock(*fd, LOCK_EX);
      } while (rc != 0 && errno == EINTR);
      b.fetch_sub(1);
      if (rc != 0) {
        return Error(Errc::unavailable,
                     std::string("flock: ") + std::strerror(errno));
      }
    }
    held_ = *fd;
    return {};
  }
  Status release() override {
    if (held_ < 0) return Error(Errc::internal, "release without a lock");
    const int rc = ::flock(held_, LOCK_UN);
    held_ = -1;
    if (rc != 0) {
      return Error(Errc::internal,
                   std::string("flock unlock: ") + std::strerror(errno));
    }
    return {};
  }
  Status extend() override { return {}; }  // flock has no lease
  Result<std::size_t> waiters(const std::string& name) override {
    return static_cast<std::size_t>(std::max(0, blocked(path_of(name)).load()));
  }

 private:
  std::string path_of(const std::string& name) const {
    std::string f = name;
    for (auto& c : f) {
      if (c == '/') c = '_';
    }
    return dir_ + "/" + f;
  }
  Result<int> fd_of(const std::string& name) {
    const std::string path = path_of(name);
    auto it = fds_.find(path);
    if (it != fds_.end()) return it->second;
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return Error(Errc::unavailable,
                   "open " + path + ": " + std::strerror(errno));
    }
    fds_[path] = fd;
    return fd;
  }

  std::string dir_;
  std::map<std::string, int> fds_;
  int held_ = -1;
};

}  // namespace

bool is_raw_flock(std::string_view url) {
  return url.starts_with("raw-flock://");
}

Result<std::unique_ptr<Session>> open_raw_flock_session(const LoadOptions& o) {
  std::string dir = o.store.substr(std::string_view("raw-flock://").size());
  if (dir.empty() || dir.front() != '/') {
    return Error(Errc::invalid_argument,
                 "raw-flock:// takes an absolute directory: raw-flock:///dir");
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error(Errc::invalid_argument,
                 "raw-flock: \"" + dir + "\" is not a directory");
  }
  return std::unique_ptr<Session>(std::make_unique<FlockSession>(dir));
}

}  // namespace baton::bench
