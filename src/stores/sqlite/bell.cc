// stores/sqlite/bell.cc — the inotify bell (see bell.h).
#include "stores/sqlite/bell.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

namespace baton::store::sq {

Bell::Bell(const std::string& db_path, const FilePolicy& files) {
  const std::string file = db_path + "-baton-bell";
  owner_ = ::getpid();
  db_path_ = db_path;
  file_fd_ = open_beside(file, files);
  if (file_fd_ < 0 && ::access(file.c_str(), R_OK) != 0) return;
  // A bell file this user may not write (another user's, mode 0644): still
  // watched, only this process's own releases do not ring other processes.
  inotify_fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (inotify_fd_ < 0 || stop_fd_ < 0 ||
      inotify_add_watch(inotify_fd_, file.c_str(), IN_MODIFY) < 0) {
    if (inotify_fd_ >= 0) ::close(inotify_fd_);
    inotify_fd_ = -1;
    return;
  }
  watcher_ = std::make_unique<std::thread>([this] { watch(); });
}

Bell::~Bell() {
  // A copy inherited through fork(): the watcher thread and the eventfd
  // are the parent's; leave them alone.
  if (::getpid() != owner_) {
    (void)watcher_.release();  // not ours to join: leaked on purpose
    (void)ckpt_.release();     // the parent's SQLite connection, likewise
    return;
  }
  if (watcher_ != nullptr) {
    const std::uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    watcher_->join();
  }
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  if (file_fd_ >= 0) ::close(file_fd_);
}

void Bell::watch() {
  alignas(struct inotify_event) char buf[4096];
  for (;;) {
    struct pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int n = ::poll(fds, 2, 1000);
    if (n < 0) continue;
    if (fds[1].revents != 0) {
      ckpt_.reset();
      return;
    }
    bool any = false;
    while (::read(inotify_fd_, buf, sizeof buf) > 0) any = true;
    if (any) local.ring();
    maybe_checkpoint();
  }
}

void Bell::maybe_checkpoint() {
  const TimePoint now = Clock::now();
  if (now - last_ckpt_ < std::chrono::milliseconds{200}) return;
  last_ckpt_ = now;
  struct stat st {};
  if (::stat((db_path_ + "-wal").c_str(), &st) != 0 ||
      st.st_size < 4 * 1024 * 1024) {
    return;
  }
  if (ckpt_ == nullptr) {
    auto c = std::make_unique<Conn>();
    if (!c->open(db_path_, false, now + std::chrono::milliseconds{100}).ok()) {
      return;
    }
    ckpt_ = std::move(c);
  }
  // PASSIVE first: copies what no reader still needs, never waits. Then
  // TRUNCATE: the WAL starts over only when no reader uses it, which under
  // steady load (waiters' looks) a writer never finds by itself; it takes
  // the write lock for at most ~20 ms to wait for the readers to move on
  // (little is left to copy) and gives up, to try again later, if they
  // do not.
  ckpt_->set_deadline(Clock::now() + std::chrono::milliseconds{50});
  auto r = ckpt_->query("PRAGMA wal_checkpoint(PASSIVE)");
  if (r.ok()) {
    ckpt_->set_deadline(Clock::now() + std::chrono::milliseconds{20});
    r = ckpt_->query("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  if (!r.ok() && ckpt_->broken()) ckpt_.reset();
}

void Bell::ring() {
  local.ring();
  const std::uint64_t g = ++gen_;
  if (file_fd_ >= 0) (void)!::pwrite(file_fd_, &g, sizeof g, 0);
}

bool FifoTurn::lock_until(TimePoint deadline) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!busy_ && line_.empty()) {
    busy_ = true;
    return true;
  }
  const std::uint64_t me = next_++;
  line_.push_back(me);
  for (;;) {
    if (!busy_ && line_.front() == me) {
      line_.pop_front();
      busy_ = true;
      return true;
    }
    if (Clock::now() >= deadline) {
      std::erase(line_, me);
      cv_.notify_all();  // the next in line may be first now
      return false;
    }
    sqlstep::wait_slice(cv_, lk, deadline);
  }
}

void FifoTurn::unlock() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    busy_ = false;
  }
  cv_.notify_all();
}

std::shared_ptr<Bell> bell_for(const std::string& db_path,
                               const FilePolicy& files) {
  static std::mutex mu;
  static auto* bells = new std::map<std::string, std::weak_ptr<Bell>>();
  std::lock_guard<std::mutex> lk(mu);
  auto& w = (*bells)[db_path + "\n" + std::to_string(::getpid())];
  auto b = w.lock();
  if (!b) {
    b = std::make_shared<Bell>(db_path, files);
    w = b;
  }
  return b;
}

}  // namespace baton::store::sq
