// stores/sqlite/watch.cc — sqlite://'s change feed (Store::watch).
//
// Every commit of any process on the host writes the database's -wal file
// (WAL mode, db.cc; a rollback-journal commit, were the mode ever changed,
// writes the database file itself), so an inotify watch on those files is
// a feed that costs the lock calls nothing: they are the same calls with or
// without a watcher. The watch is on the directory, filtered by name,
// because SQLite deletes the -wal when the last connection closes and makes
// a new one (a new inode) when the next opens; a watch on the file would go
// deaf.
//
// A write to the -wal is not yet a commit a reader sees: SQLite writes the
// frames, syncs them (synchronous=FULL), and only then publishes them in
// the -shm index (mmap: no inotify event). So an event is confirmed with
// PRAGMA data_version on the feed's own connection (it moves when another
// connection committed, and only once the commit is visible), re-read at
// growing intervals for a while after an event that did not move it yet.
// A checkpoint (bell.cc, once the -wal passes 4 MB: thousands of commits,
// each of which returned anyway) writes both files and commits nothing, but
// restarting the -wal moves data_version: one spurious return.
//
// Expiry is judged by time: nothing is written when a lease, a queued
// request's deadline or a waiter's heartbeat runs out. So each arming also
// reads the earliest such instant under the prefix (one query), and a wait
// returns once it has passed.
//
// The feed does not filter commits by prefix: a commit under another prefix
// (or to a counter) is a spurious return, which the contract allows.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "stores/sqlite/store_impl.h"

namespace baton::store::sq_impl {
namespace {

using std::chrono::microseconds;
using std::chrono::steady_clock;

// After a relevant event that did not move data_version: how long it is
// re-read (the commit's sync may still run), first after kFirstRecheck,
// then at doubling intervals.
constexpr milliseconds kSettle{3000};
constexpr milliseconds kFirstRecheck{1};
// data_version is re-read at least this often whatever inotify says (a
// lost or unseen event costs at most this much delay; the feed's own cost).
constexpr milliseconds kNet{2000};
// One read's bound (busy handler; WAL readers wait only for a recovery).
constexpr milliseconds kReadCap{1000};

class SqWatch final : public Waitable {
 public:
  SqWatch(std::string db_path, std::string tables, std::string prefix)
      : db_path_(std::move(db_path)),
        tables_(std::move(tables)),
        prefix_(std::move(prefix)) {}

  ~SqWatch() override {
    if (inotify_fd_ >= 0) ::close(inotify_fd_);
    if (stop_fd_ >= 0) ::close(stop_fd_);
  }

  // Opens the feed's connection and its inotify watch, and reads the
  // starting point. Without inotify (out of instances or watches) the
  // feed still works on its kNet re-reads alone.
  Status arm(SteadyTime deadline) {
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd_ < 0) {
      return Error(Errc::unavailable, "sqlite database \"" + db_path_ +
                                          "\": no eventfd for the change feed");
    }
    conn_ = std::make_unique<sq::Conn>();
    if (Status st = conn_->open(db_path_, false, deadline); !st.ok()) return st;
    // SQLite puts the -wal beside the file a symbolic link points to.
    std::string real = db_path_;
    if (char* r = ::realpath(db_path_.c_str(), nullptr)) {
      real = r;
      std::free(r);
    }
    const std::size_t slash = real.rfind('/');
    const std::string dir =
        slash == std::string::npos ? "." : real.substr(0, slash + 1);
    db_name_ = slash == std::string::npos ? real : real.substr(slash + 1);
    wal_name_ = db_name_ + "-wal";
    inotify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (inotify_fd_ >= 0 &&
        ::inotify_add_watch(inotify_fd_, dir.c_str(),
                            IN_MODIFY | IN_CREATE | IN_MOVED_TO) < 0) {
      ::close(inotify_fd_);
      inotify_fd_ = -1;
    }
    auto v = version(deadline);
    if (!v.ok()) return std::move(v).error();
    seen_ = *v;
    return read_expiry(deadline);
  }

  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override {
    const SteadyTime end = sqlstep::steady_of(ctx.cap(until), ctx);
    SteadyTime net_at = steady_clock::now() + kNet;
    bool look = true;  // read data_version now
    for (;;) {
      if (broken_ || interrupted()) return std::nullopt;
      SteadyTime now = steady_clock::now();
      if (look || now >= recheck_at_ || now >= net_at) {
        look = false;
        net_at = now + kNet;
        auto v = version(now + kReadCap);
        if (!v.ok()) return std::nullopt;  // the caller's list() says why
        if (*v != seen_) {
          seen_ = *v;
          (void)read_expiry(steady_clock::now() + kReadCap);
          return std::nullopt;
        }
        now = steady_clock::now();
        if (now >= recheck_at_) {
          recheck_at_ =
              now + step_ < settle_end_ ? now + step_ : SteadyTime::max();
          step_ *= 2;
        }
      }
      if (expiry_at_ <= now) {
        (void)read_expiry(now + kReadCap);
        return std::nullopt;
      }
      if (now >= end) return std::nullopt;
      const SteadyTime wake =
          std::min({end, recheck_at_, net_at, expiry_at_, now + kNet});
      const auto ms = std::chrono::ceil<milliseconds>(wake - now).count();
      struct pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
      const int n = ::poll(fds, inotify_fd_ >= 0 ? 2 : 1,
                           static_cast<int>(std::min<long long>(ms, INT_MAX)));
      if (n <= 0) continue;
      if (fds[0].revents != 0) return std::nullopt;  // interrupt()
      if (relevant_events()) {
        look = true;
        step_ = kFirstRecheck;
        recheck_at_ = steady_clock::now() + step_;
        settle_end_ = steady_clock::now() + kSettle;
      }
    }
  }

  void interrupt() override {
    Waitable::interrupt();
    const std::uint64_t one = 1;
    if (stop_fd_ >= 0) (void)!::write(stop_fd_, &one, sizeof one);
  }

 private:
  // Drains the inotify queue: true if the database or its -wal was written
  // (or events were dropped).
  bool relevant_events() {
    alignas(struct inotify_event) char buf[4096];
    bool any = false;
    for (;;) {
      const ssize_t len = ::read(inotify_fd_, buf, sizeof buf);
      if (len <= 0) return any;
      for (ssize_t at = 0; at < len;) {
        const auto* e = reinterpret_cast<const struct inotify_event*>(buf + at);
        if ((e->mask & IN_Q_OVERFLOW) != 0) {
          any = true;
        } else if (e->len > 0) {
          const std::string_view name(e->name);
          if (name == wal_name_ || name == db_name_) any = true;
        }
        at += static_cast<ssize_t>(sizeof(struct inotify_event) + e->len);
      }
    }
  }

  Result<std::int64_t> version(SteadyTime deadline) {
    conn_->set_deadline(deadline);
    auto r = conn_->query("PRAGMA data_version");
    if (!r.ok()) {
      if (conn_->broken()) broken_ = true;
      return std::move(r).error();
    }
    return r->num(0, 0);
  }

  // The earliest instant after now at which something under the prefix
  // runs out (a lease, a queued request's deadline, a waiter's
  // heartbeat): list() stops reporting it then. Read after data_version,
  // so a commit in between is seen as a change, never missed.
  Status read_expiry(SteadyTime deadline) {
    const std::string match =
        prefix_.empty() ? std::string("1")
                        : "substr(name, 1, " + std::to_string(prefix_.size()) +
                              ") = " + sq::hex_literal(prefix_);
    const std::int64_t now_us = sq::store_now_us();
    const std::string now = std::to_string(now_us);
    const std::string q =
        tables_ + "queue WHERE " + match + " AND withdrawn = 0 AND ";
    const std::string sql =
        "SELECT MIN(t) FROM (SELECT MIN(expires_us) AS t FROM " + tables_ +
        "holders WHERE " + match + " AND expires_us > " + now +
        " UNION ALL SELECT MIN(deadline_us) FROM " + q + "deadline_us > " +
        now + " UNION ALL SELECT MIN(heartbeat_us) FROM " + q +
        "heartbeat_us > " + now + ")";
    conn_->set_deadline(deadline);
    auto r = conn_->query(sql);
    if (!r.ok()) {
      if (conn_->broken()) broken_ = true;
      // Unknown: look again soon rather than miss an expiry.
      expiry_at_ = steady_clock::now() + kNet;
      return std::move(r).error();
    }
    if (r->rows.empty() || !r->rows[0][0].has_value()) {
      expiry_at_ = SteadyTime::max();
    } else {
      // Store time is CLOCK_MONOTONIC, as the steady clock is; +1 ms so
      // that the instant has passed when the wait returns.
      expiry_at_ =
          steady_clock::now() +
          microseconds{std::max<std::int64_t>(0, r->num(0, 0) - now_us)} +
          milliseconds{1};
    }
    return {};
  }

  const std::string db_path_;
  const std::string tables_;  // the store's table prefix
  const std::string prefix_;  // the watched lock names' prefix
  std::unique_ptr<sq::Conn> conn_;
  std::string db_name_, wal_name_;  // in the directory inotify watches
  int inotify_fd_ = -1;             // -1: the kNet re-reads alone
  int stop_fd_ = -1;                // eventfd that interrupt() writes
  std::int64_t seen_ = 0;           // data_version at the last return
  SteadyTime expiry_at_ = SteadyTime::max();
  // The confirmation of the last relevant event (kept across waits: a wait
  // that ends before the commit is visible leaves it to the next): the
  // next re-read, the interval after it, and when to give up.
  SteadyTime recheck_at_ = SteadyTime::max();
  milliseconds step_ = kFirstRecheck;
  SteadyTime settle_end_ = SteadyTime::min();
  bool broken_ = false;
};

}  // namespace

Result<std::unique_ptr<Waitable>> SqliteStore::watch(std::string_view prefix,
                                                     const CallContext& ctx) {
  auto w = std::make_unique<SqWatch>(o_.path, o_.prefix, std::string(prefix));
  if (Status st = w->arm(deadline(ctx)); !st.ok()) return st.error();
  return std::unique_ptr<Waitable>(std::move(w));
}

}  // namespace baton::store::sq_impl
