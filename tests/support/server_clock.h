// tests/support/server_clock.h — a server process's wall clock, stepped by
// the test: the server runs with libbaton_clockshift.so preloaded
// (clockshift.c) and reads its offset from this object's file.
//
//   ServerClock clock(dir + "/clock");         // offset 0
//   spawn_logged(args, log, false, clock.env());
//   clock.step(std::chrono::seconds(3));       // the server's time is +3 s
//   clock.step({});                            // back to the true time
//
// A step takes effect at once (the library maps the file shared). Only
// the wall clock moves; the server's monotonic clock never steps.
#ifndef BATON_TESTS_SUPPORT_SERVER_CLOCK_H_
#define BATON_TESTS_SUPPORT_SERVER_CLOCK_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace baton::testing {

// The library's path (set by the build), or "" when it was not built.
inline std::string clockshift_library() {
#ifdef BATON_TEST_CLOCKSHIFT
  return ::access(BATON_TEST_CLOCKSHIFT, R_OK) == 0 ? BATON_TEST_CLOCKSHIFT
                                                    : "";
#else
  return "";
#endif
}

class ServerClock {
 public:
  // Creates `path` with offset 0. ok() false if it cannot be made or the
  // library is missing.
  explicit ServerClock(std::string path) : path_(std::move(path)) {
    if (clockshift_library().empty()) return;
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    if (::ftruncate(fd, sizeof(std::int64_t)) == 0) {
      void* p = ::mmap(nullptr, sizeof(std::int64_t), PROT_READ | PROT_WRITE,
                       MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) offset_ns_ = static_cast<std::int64_t*>(p);
    }
    ::close(fd);
    if (offset_ns_ != nullptr)
      __atomic_store_n(offset_ns_, 0, __ATOMIC_SEQ_CST);
  }
  ~ServerClock() {
    if (offset_ns_ != nullptr) ::munmap(offset_ns_, sizeof(std::int64_t));
  }
  ServerClock(const ServerClock&) = delete;
  ServerClock& operator=(const ServerClock&) = delete;

  bool ok() const { return offset_ns_ != nullptr; }
  const std::string& path() const { return path_; }
  std::chrono::milliseconds offset() const { return offset_; }

  // The environment a server is started with.
  std::vector<std::pair<std::string, std::string>> env() const {
    return {{"LD_PRELOAD", clockshift_library()},
            {"BATON_CLOCKSHIFT_FILE", path_}};
  }

  // The server's wall clock reads the true time + `by` from now on (one
  // atomic store into the page the server maps).
  bool step(std::chrono::milliseconds by) {
    if (offset_ns_ == nullptr) return false;
    __atomic_store_n(offset_ns_, by.count() * 1'000'000, __ATOMIC_SEQ_CST);
    offset_ = by;
    return true;
  }

 private:
  std::string path_;
  std::int64_t* offset_ns_ = nullptr;  // the file, mapped shared
  std::chrono::milliseconds offset_{0};
};

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_SERVER_CLOCK_H_
