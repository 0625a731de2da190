// server/watch.cc — LOCK.WATCH, batond's change feed (docs/protocol.md):
// a long poll on the connection's own state. The connection remembers the
// prefix it watches and the table's change_count() it last answered with;
// LOCK.WATCH answers :1 at once if the count moved since, else parks until
// it moves (any table call, an expiry included, ends in after_table_call,
// which checks the parked watches) or until wait_ms passes (:0).
//
// The count is table-wide: a change outside the prefix (or a counter
// write) also wakes a watcher. That is a spurious return, which the feed
// allows; the watcher reads LOCK.LIST and finds nothing new. Only watchers
// pay: with none parked, after_table_call does one empty() check; with
// some, one comparison per parked watch.
#include <algorithm>

#include "core/validate.h"
#include "proto/commands.h"
#include "server/connection.h"

namespace baton::server {

namespace {

std::string changed_reply(bool changed) {
  std::string bytes;
  proto::RespWriter(bytes).integer(changed ? 1 : 0);
  return bytes;
}

}  // namespace

void Connection::cmd_watch(const proto::Request& req) {
  auto c = proto::decode_watch(req);
  if (!c) return reply_result_error(c.error());
  if (Status st = core::validate_prefix(c->prefix); !st.ok()) {
    return reply_result_error(st.error());
  }
  const std::uint64_t now_count = server_.table().change_count();
  if (!watch_prefix_ || *watch_prefix_ != c->prefix) {
    // (Re-)armed here: changes from now on are reported. A connection
    // that switches prefixes may have missed one of the new prefix: say
    // so at once.
    const bool switched = watch_prefix_.has_value();
    watch_prefix_ = c->prefix;
    watch_seen_ = now_count;
    if (switched) return reply(changed_reply(true), {}, /*durable=*/false);
  }
  if (watch_seen_ != now_count) {
    watch_seen_ = now_count;
    return reply(changed_reply(true));
  }
  if (c->wait.count() == 0) {
    return reply(changed_reply(false), {}, /*durable=*/false);
  }
  parked_ = true;
  ++park_id_;
  server_.park_watch(shared_from_this(), park_id_, c->wait);
}

void Server::park_watch(const std::shared_ptr<Connection>& c, std::uint64_t id,
                        std::chrono::milliseconds wait) {
  auto timer = std::make_shared<asio::steady_timer>(io_, wait);
  const Connection* key = c.get();  // compared, never dereferenced
  timer->async_wait([this, key, id](std::error_code ec) {
    if (ec) return;  // answered by a change (the timer was cancelled)
    auto it = std::find_if(
        watches_.begin(), watches_.end(),
        [&](const ParkedWatch& w) { return w.key == key && w.who.id == id; });
    if (it == watches_.end()) return;
    ParkedWatch w = std::move(*it);
    watches_.erase(it);
    // The wait ran out with nothing changed: the connection's watch_seen_
    // stays, so a change from now on answers the next LOCK.WATCH at once.
    if (auto conn = w.who.conn.lock()) {
      conn->complete_parked(id, changed_reply(false), {}, false);
    }
  });
  watches_.push_back(ParkedWatch{Parked{c, id}, key, std::move(timer)});
}

void Server::watches_changed() {
  const std::uint64_t count = table_.change_count();
  // complete_parked() only stages a reply (the queue resumes from a posted
  // handler), so nothing re-enters this loop. Each watch compares with
  // what its own connection last saw: a change made where no check
  // followed is still reported (at the latest by the next LOCK.WATCH).
  std::erase_if(watches_, [&](ParkedWatch& w) {
    auto conn = w.who.conn.lock();
    if (conn && !conn->closed() && conn->watch_seen_ == count) return false;
    w.timer->cancel();
    if (conn && !conn->closed()) {
      conn->watch_seen_ = count;
      conn->complete_parked(w.who.id, changed_reply(true), {}, false);
    }
    return true;
  });
}

}  // namespace baton::server
