// The bounded history of who held what, and its derivation from polls
// (statuspage/status_page.h).
#include <algorithm>

#include "statuspage/status_page.h"

namespace baton::statuspage {

std::string_view kind_name(HistoryEvent::Kind k) {
  switch (k) {
    case HistoryEvent::Kind::grant:
      return "grant";
    case HistoryEvent::Kind::release:
      return "release";
    case HistoryEvent::Kind::expire:
      return "expire";
    case HistoryEvent::Kind::lost:
      return "lost";
    case HistoryEvent::Kind::wait:
      return "wait";
  }
  return "?";
}

void History::trim(std::int64_t now_ms) {
  // Events are added in time order except waits (dated by their start):
  // the front is the oldest recorded, close enough for a window cut.
  while (!events_.empty() && events_.front().at_ms < now_ms - window_.count() &&
         (events_.front().kind != HistoryEvent::Kind::wait ||
          events_.front().end_ms < now_ms - window_.count())) {
    events_.pop_front();
  }
}

void History::add(HistoryEvent e) {
  if (size_ == 0) return;
  trim(e.kind == HistoryEvent::Kind::wait ? e.end_ms : e.at_ms);
  if (events_.size() == size_) {
    events_.pop_front();
    ++dropped_;
  }
  events_.push_back(std::move(e));
}

std::string History::json(
    const Query& q, std::int64_t now_ms,
    const std::function<bool(std::string_view)>& visible) {
  trim(now_ms);
  auto matches = [&](const HistoryEvent& e) {
    if (q.has_lock ? e.lock != q.lock
                   : e.lock.compare(0, q.prefix.size(), q.prefix) != 0) {
      return false;
    }
    return !visible || visible(e.lock);
  };
  // The newest kMaxHistoryEvents that match, sent oldest first.
  std::vector<const HistoryEvent*> picked;
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    if (!matches(*it)) continue;
    if (picked.size() == kMaxHistoryEvents) break;
    picked.push_back(&*it);
  }
  const bool truncated = picked.size() == kMaxHistoryEvents;
  std::string o = "{\"server_time_ms\":" + std::to_string(now_ms) +
                  ",\"window_ms\":" + std::to_string(window_.count()) +
                  ",\"size_limit\":" + std::to_string(size_) +
                  ",\"dropped\":" + std::to_string(dropped_) + ",";
  if (q.has_lock) {
    o += "\"lock\":";
    json_str(o, q.lock);
  } else {
    o += "\"prefix\":";
    json_str(o, q.prefix);
  }
  o += ",\"truncated\":";
  o += truncated ? "true" : "false";
  o += ",\"events\":[";
  for (auto it = picked.rbegin(); it != picked.rend(); ++it) {
    const HistoryEvent& e = **it;
    if (it != picked.rbegin()) o += ',';
    o += "{\"kind\":\"" + std::string(kind_name(e.kind)) + "\",\"lock\":";
    json_str(o, e.lock);
    o += ",\"label\":";
    json_str(o, e.label);
    o += ",\"at_ms\":" + std::to_string(e.at_ms);
    if (e.kind == HistoryEvent::Kind::wait) {
      o += ",\"end_ms\":" + std::to_string(e.end_ms);
    } else {
      o += ",\"fencing_token\":" + std::to_string(e.fencing_token) +
           ",\"mode\":\"" + (e.shared ? "shared" : "exclusive") + "\"";
    }
    o += '}';
  }
  o += "]}\n";
  return o;
}

void PollDiff::next(const std::vector<LockInfo>& locks, std::int64_t now_ms,
                    History& history) {
  std::map<std::pair<std::string, std::uint64_t>, Held> held;
  std::map<std::pair<std::string, std::string>, Waiting> waiting;
  std::vector<HistoryEvent> grants;  // recorded after the ends they follow
  for (const LockInfo& l : locks) {
    for (const HolderInfo& h : l.holders) {
      const auto key = std::make_pair(l.name, h.fencing_token);
      // The earliest expiry any poll implied: some stores round time_left
      // up (etcd: whole seconds), so the latest estimate can be late.
      std::int64_t expires = now_ms + h.time_left.count();
      if (auto it = held_.find(key); it != held_.end()) {
        expires = std::min(expires, it->second.expires_ms);
      }
      held[key] = {h.label, h.shared, expires};
      // What was held before the first poll is not a grant seen.
      if (!first_ && !held_.contains(key)) {
        grants.push_back({HistoryEvent::Kind::grant, l.name, h.label,
                          h.fencing_token, h.shared, now_ms, 0});
      }
    }
    for (const WaiterInfo& w : l.waiters) {
      Waiting& wt = waiting[{l.name, w.label}];
      const std::int64_t since = now_ms - w.waited.count();
      if (wt.seen++ == 0 || since < wt.since_ms) wt.since_ms = since;
    }
  }
  for (const auto& [key, h] : held_) {
    if (held.contains(key)) continue;
    // Gone at most one poll gap after its expiry: it expired (poll-derived
    // times are good to one interval, either way).
    const auto kind = h.expires_ms <= now_ms + (now_ms - last_ms_)
                          ? HistoryEvent::Kind::expire
                          : HistoryEvent::Kind::release;
    history.add({kind, key.first, h.label, key.second, h.shared, now_ms, 0});
  }
  // Waiters have no identity beyond their label: a label with fewer
  // waiters than before ended a wait (the longest one, dated by the
  // earliest start seen).
  for (const auto& [key, w] : waiting_) {
    auto it = waiting.find(key);
    const int now_seen = it == waiting.end() ? 0 : it->second.seen;
    for (int i = now_seen; i < w.seen; ++i) {
      history.add({HistoryEvent::Kind::wait, key.first, key.second, 0, false,
                   w.since_ms, now_ms});
    }
  }
  for (HistoryEvent& e : grants) history.add(std::move(e));
  held_ = std::move(held);
  waiting_ = std::move(waiting);
  first_ = false;
  last_ms_ = now_ms;
}

}  // namespace baton::statuspage
