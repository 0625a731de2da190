// statuspage/status_page.h — the live status page shared by batond (on its
// metrics listener) and `baton status --serve` (any store): the page
// itself, the snapshot and history JSON, query checking, the server-sent
// event streams and the bounded history of who held what.
//
// Everything here runs on one asio io_context thread (the owner's); no
// locking. The owner keeps its own HTTP listener and access rules and
// hands each status request to these pieces.
#ifndef BATON_STATUSPAGE_STATUS_PAGE_H_
#define BATON_STATUSPAGE_STATUS_PAGE_H_

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"

namespace baton::statuspage {

// The same limits for every server of the page.
inline constexpr std::size_t kMaxStreams = 64;
inline constexpr auto kPushInterval = std::chrono::milliseconds(150);
inline constexpr auto kHeartbeat = std::chrono::seconds(15);
inline constexpr auto kStall = std::chrono::seconds(10);
inline constexpr std::size_t kMaxLocks = 1000;          // per snapshot
inline constexpr std::size_t kMaxCounters = 1000;       // per snapshot
inline constexpr std::size_t kMaxHistoryEvents = 5000;  // per answer

// The page: HTML, CSS and JS in one document (page_html.cc).
std::string_view page_html();
// The Content-Security-Policy header line the page is served with.
std::string_view page_csp_header();

// `s` as a JSON string; bytes that are not UTF-8 become U+FFFD.
void json_str(std::string& out, std::string_view s);
std::int64_t wall_ms();
// An HTTP/1.1 answer that closes the connection.
std::string http_text(std::string_view status, std::string_view type,
                      std::string_view body, std::string_view extra = {});
// A snapshot without its ticking figures (time left, waited): what a push
// compares with the last one sent.
std::string without_times(std::string_view json);

// The parameters of a status request. `lock` only for /history.json.
struct Query {
  std::string prefix;
  std::string lock;
  bool has_lock = false;
};
// Parses and checks the query string of `path` (one of /, /status.json,
// /events, /history.json). Returns an error text for a 400 answer: a bad
// %-escape, an unknown or repeated parameter, a value over kMaxNameBytes,
// not UTF-8, or with control characters. Empty: `q` is set.
std::string parse_query(std::string_view path, std::string_view query,
                        Query& q);
// True for the paths the page serves.
bool is_page_path(std::string_view path);

// Appends `"locks":[...],"locks_truncated":B` for the locks under `prefix`
// that `visible` lets through, at most kMaxLocks.
void locks_json(std::string& o, const std::vector<LockInfo>& locks,
                std::string_view prefix,
                const std::function<bool(std::string_view)>& visible);

// Reads one request head (up to 8 KiB) within 10 s; "" if none came.
asio::awaitable<std::string> read_request_head(
    asio::io_context& io, std::shared_ptr<asio::ip::tcp::socket> sock);
// "GET <target> HTTP/1.1": the target ("" for anything else).
std::string_view request_target(std::string_view head);

// What happened to a lock, as the history records it.
struct HistoryEvent {
  enum class Kind : std::uint8_t { grant, release, expire, lost, wait };
  Kind kind = Kind::grant;
  std::string lock;
  std::string label;
  std::uint64_t fencing_token = 0;  // 0 for waits
  bool shared = false;
  std::int64_t at_ms = 0;   // wall clock; for waits: when the wait began
  std::int64_t end_ms = 0;  // waits only: when it ended
};
std::string_view kind_name(HistoryEvent::Kind k);

// A /history.json answer read back (history_parse.cc); "" or an error.
struct ParsedHistory {
  std::int64_t server_time_ms = 0, window_ms = 0, dropped = 0;
  std::vector<HistoryEvent> events;
};
std::string parse_history(std::string_view json, ParsedHistory& out);

// A bounded history: at most `size` events, none older than `window`; the
// oldest go first. size 0 records nothing.
class History {
 public:
  History(std::size_t size, std::chrono::milliseconds window)
      : size_(size), window_(window) {}
  void add(HistoryEvent e);
  // The events of `lock` (exact) or under `prefix`, oldest first, at most
  // kMaxHistoryEvents (the newest kept), as a JSON document.
  std::string json(const Query& q, std::int64_t now_ms,
                   const std::function<bool(std::string_view)>& visible);
  std::size_t size() const { return events_.size(); }
  std::chrono::milliseconds window() const { return window_; }

 private:
  void trim(std::int64_t now_ms);
  std::size_t size_;
  std::chrono::milliseconds window_;
  std::deque<HistoryEvent> events_;
  std::uint64_t dropped_ = 0;  // events pushed out by `size` (not by age)
};

// The history of successive snapshots (`baton status --serve`): a holder
// fencing token not seen before is a grant at poll time; a holder gone is
// an end, "expire" if its store expiry (the earliest any poll implied) had
// passed by then, give or take one poll gap, else "release";
// a waiter gone is a finished wait (its start from its waited figure).
// Times are those of the polls, so within one interval of the truth.
class PollDiff {
 public:
  void next(const std::vector<LockInfo>& locks, std::int64_t now_ms,
            History& history);

 private:
  struct Held {
    std::string label;
    bool shared = false;
    std::int64_t expires_ms = 0;  // wall clock, from the last time_left
  };
  struct Waiting {
    std::int64_t since_ms = 0;
    int seen = 0;  // waiters with this label in the last poll
  };
  std::map<std::pair<std::string, std::uint64_t>, Held> held_;
  std::map<std::pair<std::string, std::string>, Waiting> waiting_;
  bool first_ = true;
  std::int64_t last_ms_ = 0;  // the previous poll
};

// The open GET /events streams. A push builds one snapshot per distinct
// (prefix, viewer) and sends it to each stream whose last snapshot
// differs. Nothing waits for a client: each stream has one write in
// flight and at most one snapshot queued behind it (a newer one replaces
// it); a stream whose write has not finished within kStall is dropped. A
// comment line goes to every idle stream each kHeartbeat so that dead
// peers are found.
class StreamHub {
 public:
  // build(prefix, viewer): the snapshot JSON (viewer: the owner's opaque
  // identity of who looks, or null). version(): moves whenever what a
  // snapshot shows may have changed. after_push: called after each push.
  StreamHub(asio::io_context& io,
            std::function<std::string(const std::string&, const void*)> build,
            std::function<std::uint64_t()> version,
            std::function<void()> after_push = {});
  ~StreamHub();
  bool full() const { return streams_.size() >= kMaxStreams; }
  bool empty() const { return streams_.empty(); }
  // Runs one stream on `sock` until its peer goes or it is dropped.
  asio::awaitable<void> run(std::shared_ptr<asio::ip::tcp::socket> sock,
                            std::string prefix, const void* viewer);
  // Schedules a push when version() moved (at most one per kPushInterval).
  void changed();
  void close_all();

 private:
  struct Stream;
  void push();
  void send(const std::shared_ptr<Stream>& st, std::string msg, bool snapshot);
  void drop(const std::shared_ptr<Stream>& st);
  void arm_heartbeat();

  asio::io_context& io_;
  std::function<std::string(const std::string&, const void*)> build_;
  std::function<std::uint64_t()> version_;
  std::function<void()> after_push_;
  std::vector<std::shared_ptr<Stream>> streams_;
  asio::steady_timer push_timer_, heartbeat_timer_;
  bool push_armed_ = false, heartbeat_armed_ = false;
  std::chrono::steady_clock::time_point last_push_{};
  std::uint64_t pushed_version_ = 0;
};

}  // namespace baton::statuspage

#endif  // BATON_STATUSPAGE_STATUS_PAGE_H_
