// server/server.h — batond: a RESP2 network shell around core::LockTable.
//
// One io_context thread owns everything (the table is single-threaded).
// Each connection is a session: its queued requests leave the table when it
// closes; its EPHEMERAL leases are freed session_timeout later. Blocking
// acquires are parked and answered when the table reports their grant
// (take_events() is drained after every table call). Expiry is driven by one
// steady_timer, re-armed only when LockTable::next_deadline() moves earlier
// than the instant it is set for. Replies that acknowledge a
// change are sent only once the journal covers it (fsync policy); the
// fdatasync runs on the journal's sync thread and its result is posted back
// to the io thread (group commit, see persist()).
//
// Thread safety: start()/run() on one thread; stop() from any thread.
#ifndef BATON_SERVER_SERVER_H_
#define BATON_SERVER_SERVER_H_

#include <asio.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "baton/clock.h"
#include "core/lock_table.h"
#include "proto/resp.h"
#include "server/config.h"
#include "server/history_sink.h"
#include "server/journal.h"
#include "server/tls.h"
#include "statuspage/status_page.h"

namespace baton::server {

class Connection;

struct ServerStats {
  std::uint64_t connections_total = 0, connections_refused = 0;
  std::uint64_t commands = 0, errors = 0, protocol_errors = 0;
  std::uint64_t waits = 0, wait_grants = 0, wait_timeouts = 0;
  std::uint64_t expirations = 0, refused_unavailable = 0, undone_grants = 0;
  std::uint64_t permission_denied = 0, auth_failures = 0;
};

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Restores from the data dir and binds the listeners.
  Status start();
  void run();   // until stop()
  void stop();  // thread-safe
  std::uint16_t port() const { return port_; }
  std::uint16_t metrics_port() const { return metrics_port_; }
  std::uint16_t tls_port() const { return tls_port_; }

  // --- used by Connection / command handlers (io thread) -----------------
  const ServerConfig& config() const { return config_; }
  core::LockTable& table() { return table_; }
  const Clock& clock() const { return *clock_; }
  ServerStats& stats() { return stats_; }
  // User name -> quick_digest of the password last verified for it (acl.h):
  // AUTH runs PBKDF2 only for a password not seen before.
  std::map<std::string, std::string>& auth_cache() { return auth_cache_; }
  std::size_t connection_count() const { return connections_.size(); }
  // Journal sequence a reply must wait for (0 if none).
  std::uint64_t reply_seq() const;
  // Journal sequence that is durable now (everything, without a journal).
  std::uint64_t durable_seq() const;
  bool has_journal() const { return journal_ != nullptr; }
  bool persistence_failed() const;
  // Call after every table call: drains events, re-arms the timer, syncs.
  void after_table_call();
  // Asks for replies staged on `c` to be released once durable.
  void stage_pending(const std::shared_ptr<Connection>& c);

  void park_single(const std::string& name, const OwnerToken& token,
                   const std::shared_ptr<Connection>& c, std::uint64_t id);
  struct MultiPark {
    std::vector<std::string> names;
    OwnerToken reservation;
    core::Nanos ttl{0};
    std::uint32_t capacity = 1;
    std::string label;
    bool all_or_nothing = false;
    core::SessionId session = 0;
    std::optional<core::Instant> all_deadline;  // acquire_all only
  };
  void park_multi(MultiPark request, std::chrono::milliseconds wait,
                  const std::shared_ptr<Connection>& c, std::uint64_t id);
  // Runs acquire_multi for a parked or new request; fills grants.
  Result<core::MultiOutcome> run_multi(const MultiPark& p,
                                       std::optional<core::Instant> deadline);
  // A waiter with this (name, token) was withdrawn by a release.
  void withdrawn(const std::string& name, const OwnerToken& token);

  // LOCK.WATCH (watch.cc): parks connection `c`'s watch `id` until the
  // table's change count moves past what `c` last saw, or `wait` passes.
  void park_watch(const std::shared_ptr<Connection>& c, std::uint64_t id,
                  std::chrono::milliseconds wait);

  void connection_closed(const std::shared_ptr<Connection>& c,
                         bool had_ephemeral);
  // Whether a connection other than `except` has a staged reply that
  // acknowledges the lease (name, token) (see Connection::close()).
  bool grant_staged_elsewhere(const Connection* except, std::string_view name,
                              const OwnerToken& token) const;

  core::Grant to_grant(const core::CoreGrant& g) const;
  std::string info_text() const;
  std::string metrics_text() const;

 private:
  struct Parked {
    std::weak_ptr<Connection> conn;
    std::uint64_t id = 0;
  };
  struct ParkedMulti {
    Parked who;
    MultiPark request;
    std::shared_ptr<asio::steady_timer> timer;  // acquire_some wait
  };

  // tls: connections accepted here speak TLS (tls_ctx_).
  asio::awaitable<void> accept_loop(asio::ip::tcp::acceptor& acceptor,
                                    bool tls);
  // The HTTP listener (metrics_listen): one coroutine per connection
  // (metrics.cc); GET /metrics, and the status page (status_page.cc).
  asio::awaitable<void> metrics_loop(asio::ip::tcp::acceptor& acceptor);
  asio::awaitable<void> http_session(
      std::shared_ptr<asio::ip::tcp::socket> socket);
  enum class Access { allowed, unauthorized, forbidden };
  Access metrics_access(const std::string& request);
  // With users: the user whose HTTP Basic credentials `request` carries,
  // or null (counted in auth_failures).
  const User* http_user(const std::string& request);
  // --- status page (status_page.cc) ---
  // GET /, /status.json, /events, /history.json: writes the answer to
  // `socket`; returns once the exchange (for /events: the stream) is over.
  asio::awaitable<void> serve_status(std::shared_ptr<asio::ip::tcp::socket> s,
                                     const std::string& request,
                                     std::string_view target);
  // The JSON snapshot of the locks and counters under `prefix` that `user`
  // may read (null: no users, everything).
  std::string status_json(std::string_view prefix, const User* user);
  // Called after every table call: has the open streams sent a snapshot
  // when the table's change_count() moved (at most one per interval).
  void status_changed();
  // True if no connection in `who` can still be sent a reply (each is
  // closed or its peer has gone).
  bool clients_gone(const std::vector<Parked>& who);
  void drain_events();
  // Answers the parked watches once the change count moved (watch.cc).
  void watches_changed();
  void handle_event(const core::Event& e);
  void answer_multi(std::map<OwnerToken, std::vector<ParkedMulti>>::iterator it,
                    bool final_answer);
  void arm_deadline_timer();
  void persist();
  std::chrono::milliseconds sync_interval() const;
  void maybe_start_sync();
  void on_sync_done(const SyncResult& result);
  void release_staged();

  ServerConfig config_;
  asio::io_context io_;
  const std::shared_ptr<const Clock> clock_ = Clock::steady();
  core::LockTable table_;
  std::unique_ptr<Journal> journal_;
  asio::ip::tcp::acceptor acceptor_;
  asio::ip::tcp::acceptor metrics_acceptor_;
  asio::ip::tcp::acceptor tls_acceptor_;
  std::unique_ptr<asio::ssl::context> tls_ctx_;  // tls_listen only
  std::uint16_t port_ = 0, metrics_port_ = 0, tls_port_ = 0;
  asio::signal_set signals_;
  asio::steady_timer deadline_timer_;
  std::optional<core::Instant> armed_;
  asio::steady_timer batch_timer_;  // delays a sync to the interval
  bool batch_armed_ = false;
  std::chrono::steady_clock::time_point last_sync_start_{};
  bool draining_ = false;
  bool release_posted_ = false;
  bool stopping_ = false;  // stop(): connections drain, then io_ stops
  // Ends the stop: closes what is left, waits for a sync in flight.
  void finish_stop();
  core::SessionId next_session_ = 1;
  std::set<std::shared_ptr<Connection>> connections_;
  std::set<std::shared_ptr<Connection>> staged_;
  std::map<std::pair<std::string, OwnerToken>, std::vector<Parked>> parked_;
  std::map<OwnerToken, std::vector<ParkedMulti>> parked_multi_;
  std::map<core::SessionId, std::shared_ptr<asio::steady_timer>> ephemeral_;
  // Parked LOCK.WATCH requests. Empty unless someone watches: lock calls
  // then pay one empty() check for the feed, nothing else.
  struct ParkedWatch {
    Parked who;
    const Connection* key = nullptr;  // who.conn's object (identity only)
    std::shared_ptr<asio::steady_timer> timer;  // the wait's end
  };
  std::vector<ParkedWatch> watches_;
  ServerStats stats_;
  std::map<std::string, std::string> auth_cache_;
  std::size_t http_sessions_ = 0;  // open HTTP connections (all paths)
  // The history of grants and ends (history_size, history_window), fed by
  // history_sink_ (the table's change sink; it passes changes on to the
  // journal).
  statuspage::History history_;
  HistorySink history_sink_;
  std::unique_ptr<statuspage::StreamHub> status_hub_;
  friend class Connection;
};

}  // namespace baton::server

#endif  // BATON_SERVER_SERVER_H_
