// stores/redis/watch.cc — the keyspace-notification change feed (see
// watch.h).
#include "stores/redis/watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <optional>
#include <utility>

namespace baton::store::redis {
namespace {

// One server's subscription: its own connection, used by nothing else
// (a subscribed connection takes no other commands).
struct Sub {
  Target target;
  ConnPtr conn;
};

// True if `r` is a message of a pattern subscription.
bool is_message(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements < 1) {
    return false;
  }
  const redisReply* kind = r->element[0];
  return kind->type == REDIS_REPLY_STRING &&
         std::string_view(kind->str, kind->len) == "pmessage";
}

class KeyspaceWatch final : public Waitable {
 public:
  KeyspaceWatch(std::vector<Sub> subs, int stop_fd, Lister lister)
      : subs_(std::move(subs)), stop_fd_(stop_fd), lister_(std::move(lister)) {}
  ~KeyspaceWatch() override { ::close(stop_fd_); }

  // The earliest lease expiry under the prefix, read after the
  // subscription is active (a change after the read is a message).
  void read_expiry(const CallContext& ctx) {
    auto locks = lister_(ctx);
    if (!locks.ok()) {
      // Unknown: read again soon rather than miss an expiry.
      expiry_at_ = Steady::now() + kRetry;
      return;
    }
    milliseconds first = milliseconds::max();
    for (const LockInfo& l : *locks) {
      for (const HolderInfo& h : l.holders) {
        // A lease at 0 is ending now: the store's next read drops it.
        if (h.time_left > milliseconds(0)) first = std::min(first, h.time_left);
      }
    }
    expiry_at_ = first == milliseconds::max() ? Steady::time_point::max()
                                              : Steady::now() + first + kPast;
  }

  // Returns at the first message since the previous return (messages that
  // came meanwhile wait in the socket: the subscription never lapses
  // between two waits, so nothing is lost), when the earliest lease it knows
  // of runs out (no write happens then: the key expires a second after its
  // last lease), at `until`, on interrupt(), and at once — now and on
  // every later wait — once a connection broke.
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override {
    const Steady::time_point end = steady_at(ctx, ctx.cap(until));
    std::vector<pollfd> fds(subs_.size() + 1);
    for (;;) {
      if (broken_ || interrupted()) return std::nullopt;
      bool changed = false;
      for (Sub& s : subs_) {
        if (!take(s, &changed)) broken_ = true;
      }
      if (broken_) return std::nullopt;
      const Steady::time_point now = Steady::now();
      if (changed || now >= expiry_at_) {
        read_expiry(ctx);
        return std::nullopt;
      }
      if (now >= end) return std::nullopt;
      // Bytes OpenSSL decrypted already: poll(2) cannot see them.
      bool pending = false;
      fds[0] = {stop_fd_, POLLIN, 0};
      for (std::size_t i = 0; i < subs_.size(); ++i) {
        Conn* c = subs_[i].conn.get();
        fds[i + 1] = {c->fd(), POLLIN, 0};
        if (c->tls && c->tls->has_pending()) pending = true;
      }
      const Steady::time_point wake = std::min(end, expiry_at_);
      const long long ms =
          wake == Steady::time_point::max()
              ? INT_MAX
              : std::chrono::ceil<milliseconds>(wake - now).count();
      const int n = ::poll(
          fds.data(), fds.size(),
          pending ? 0 : static_cast<int>(std::min<long long>(ms, INT_MAX)));
      if (n < 0 && errno != EINTR) {
        broken_ = true;
        continue;
      }
      if (fds[0].revents != 0) return std::nullopt;  // interrupt()
      for (std::size_t i = 0; i < subs_.size(); ++i) {
        Conn* c = subs_[i].conn.get();
        const bool ready =
            (fds[i + 1].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
        if (!ready && !(c->tls && c->tls->has_pending())) continue;
        std::string why;
        if (!read_in(c, &why)) broken_ = true;
      }
    }
  }

  void interrupt() override {
    Waitable::interrupt();
    const std::uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
  }

 private:
  // Takes the replies buffered on `s` (no I/O): *changed once a message
  // was among them. False if the stream is corrupt.
  static bool take(Sub& s, bool* changed) {
    for (;;) {
      void* raw = nullptr;
      if (redisGetReplyFromReader(s.conn->get(), &raw) != REDIS_OK) {
        return false;
      }
      if (raw == nullptr) return true;
      ReplyPtr reply(static_cast<redisReply*>(raw));
      if (is_message(reply.get())) *changed = true;
    }
  }

  // A lease's time_left is on the server's clock, rounded: a little past
  // it, the lease is gone from list().
  static constexpr milliseconds kPast{5};
  static constexpr milliseconds kRetry{2000};

  std::vector<Sub> subs_;
  const int stop_fd_;  // eventfd that interrupt() writes
  const Lister lister_;
  Steady::time_point expiry_at_ = Steady::time_point::max();
  bool broken_ = false;
};

// Arms one server: *on is set when its notifications are on, and the
// returned connection is then subscribed to `pattern`.
Result<ConnPtr> arm_one(const Target& t, const std::string& pattern, bool* on,
                        const CallContext& ctx) {
  *on = false;
  auto conn = connect(t, ctx);
  if (!conn.ok()) return std::move(conn).error();
  auto r =
      command(conn->get(), t, {"CONFIG", "GET", "notify-keyspace-events"}, ctx);
  if (!r.ok()) return std::move(r).error();
  // An error reply (CONFIG refused by an ACL or renamed away) says
  // nothing: no feed.
  const redisReply* cfg = r->get();
  if (cfg->type != REDIS_REPLY_ARRAY || cfg->elements < 2 ||
      cfg->element[1]->type != REDIS_REPLY_STRING ||
      !notifications_on(
          std::string_view(cfg->element[1]->str, cfg->element[1]->len))) {
    return ConnPtr();
  }
  auto sub = command(conn->get(), t, {"PSUBSCRIBE", pattern}, ctx);
  if (!sub.ok()) return std::move(sub).error();
  // The confirmation: from here on every change is published to us.
  const redisReply* ok = sub->get();
  if (ok->type != REDIS_REPLY_ARRAY || ok->elements < 1 ||
      ok->element[0]->type != REDIS_REPLY_STRING ||
      std::string_view(ok->element[0]->str, ok->element[0]->len) !=
          "psubscribe") {
    return ConnPtr();  // refused (an ACL without the channel, ...)
  }
  *on = true;
  return std::move(*conn);
}

}  // namespace

bool notifications_on(std::string_view flags) {
  auto has = [&](char c) { return flags.find(c) != std::string_view::npos; };
  const bool all = has('A');
  return has('K') && (all || (has('$') && has('g') && has('x')));
}

std::string glob_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

std::string keyspace_pattern(int db, std::string_view key_prefix,
                             std::string_view name_prefix) {
  return "__keyspace@" + std::to_string(db) + "__:" + glob_escape(key_prefix) +
         "l:" + glob_escape(name_prefix) + "*";
}

Result<std::unique_ptr<Waitable>> watch_keyspace(
    const std::vector<Instance*>& instances, std::string_view prefix,
    std::size_t need, Lister lister, const CallContext& ctx) {
  std::vector<Sub> subs;
  std::size_t answered = 0;
  std::optional<Error> first_error;
  // One server after the other: arming is rare (once per watcher), and a
  // server that does not answer costs at most the call's deadline.
  for (Instance* inst : instances) {
    const Target& t = inst->target();
    bool on = false;
    auto conn =
        arm_one(t, keyspace_pattern(t.db, inst->prefix(), prefix), &on, ctx);
    if (!conn.ok()) {
      if (!first_error) first_error = std::move(conn).error();
      continue;
    }
    ++answered;
    if (on) subs.push_back(Sub{t, std::move(*conn)});
  }
  if (answered < need && first_error) return *first_error;
  if (subs.size() < need) return std::unique_ptr<Waitable>();
  const int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    return Error(Errc::unavailable, "no eventfd for the change feed");
  }
  auto feed = std::make_unique<KeyspaceWatch>(std::move(subs), stop_fd,
                                              std::move(lister));
  feed->read_expiry(ctx);
  return std::unique_ptr<Waitable>(std::move(feed));
}

}  // namespace baton::store::redis
