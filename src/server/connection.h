// server/connection.h — one client connection of batond (one session).
//
// Requests are answered strictly in order. While a blocking request is
// parked, later requests are buffered (not executed) and the socket is still
// read, so a close is noticed at once and the session's waiters leave the
// queue. Replies are staged with the journal sequence they depend on and
// written once that sequence is durable; if persistence fails, a staged
// grant is undone and answered `unavailable` instead.
//
// A client that has gone is granted nothing (docs/server.md, "Clients that
// leave"): before a read batch executes its first acquire, one poll(2)
// asks whether the peer has closed or reset the connection (POLLRDHUP); if
// so, acquires are dropped unexecuted (other requests, such as releases,
// still run). Grants whose replies can never be sent (the connection closes
// while they wait for the journal) are given back by token.
//
// Memory: what a connection holds in batond — replies not yet written
// (staged, buffered, being written) plus requests queued behind a blocking
// one — is bounded by kMaxHeldBytes (64 MiB); a connection that would go
// over it is closed at once (a client that does not read its replies).
//
// Thread safety: io thread only.
#ifndef BATON_SERVER_CONNECTION_H_
#define BATON_SERVER_CONNECTION_H_

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "proto/resp.h"
#include "server/server.h"

namespace baton::server {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Grants = std::vector<std::pair<std::string, OwnerToken>>;

  // tls: the connection came in on the TLS listener; its handshake runs
  // first (bounded by kHandshakeTimeout).
  Connection(Server& server, asio::ip::tcp::socket socket,
             core::SessionId session, asio::ssl::context* tls = nullptr);
  void start();
  // Closes the socket and ends the session. With give_back_unsent (every
  // close but the server's shutdown), grants created for this connection
  // whose replies were never written are given back (undo_grant).
  void close(bool give_back_unsent = true);
  // The server is stopping: a parked request is answered `unavailable`
  // (its waiter leaves the queue), requests buffered behind it are dropped
  // unexecuted, and the connection closes once its output (staged replies
  // included, as the journal makes them durable) is written.
  void shut_down();
  bool closed() const { return closed_; }
  core::SessionId session() const { return session_; }
  // True if the peer has closed or reset the connection, even with data
  // still unread (poll with POLLRDHUP, at most once per read batch; once
  // true, stays true). Outside a batch it polls every time.
  bool peer_closed();

  // A staged reply: sent when the journal covers every change made so far
  // (or, with durable = false, as soon as the replies before it are sent).
  // `grants` are the leases it acknowledges (released if persistence fails);
  // `created`: this reply's request created them (given back if the reply
  // can never be sent).
  void reply(std::string bytes, Grants grants = {}, bool durable = true,
             bool created = false);
  // Completes the parked request `id` with a reply and resumes the queue.
  void complete_parked(std::uint64_t id, std::string bytes, Grants grants,
                       bool created);
  // Moves durable staged replies to the socket (or fails them).
  void release(std::uint64_t durable_seq, bool failed,
               const std::string& failure);
  bool has_staged() const { return !staged_.empty(); }
  // Whether a staged (unsent) reply on this connection acknowledges the
  // lease (name, token).
  bool stages_grant(std::string_view name, const OwnerToken& token) const;

 private:
  struct Staged {
    std::uint64_t seq;
    std::string bytes;
    Grants grants;
    bool created = false;
  };
  // Bytes held for this connection (see the top of this file).
  std::size_t held_bytes() const {
    return out_.size() + backlog_bytes_ + writing_.size() + staged_bytes_ +
           pending_bytes_;
  }
  void append_out(std::string_view bytes);
  // Notes a connection that holds much (its memory is trimmed at close).
  void note_held() {
    if (held_bytes() > kTrimAfterBytes) held_much_ = true;
  }
  static constexpr std::size_t kTrimAfterBytes = 4u << 20;
  // Closes a connection that would hold more than kMaxHeldBytes.
  void cut_off(const char* what);
  // LOCK.ACQUIRE, ACQUIRE_SOME, ACQUIRE_ALL (the commands that grant).
  static bool grants_locks(const proto::Request& req);
  void give_back_unsent();
  asio::awaitable<void> read_loop();
  // TLS connections: the handshake; false (logged, closed) if it failed.
  asio::awaitable<bool> tls_handshake();
  // The first bytes on the plain listener open a TLS handshake: logged,
  // answered with a plain error, closed.
  bool tls_on_plain_port(const char* data, std::size_t n);
  std::string peer_name() const;
  void process_pending();
  void execute(const proto::Request& req);  // commands.cc
  void flush();

  // commands.cc
  void cmd_acquire(const proto::Request& req);
  void cmd_extend(const proto::Request& req);
  void cmd_release(const proto::Request& req);
  void cmd_describe(const proto::Request& req);
  void cmd_list(const proto::Request& req);
  void cmd_multi(const proto::Request& req);
  void cmd_counter(const proto::Request& req);
  void cmd_watch(const proto::Request& req);  // watch.cc
  void cmd_history(const proto::Request& req);
  void cmd_hello(const proto::Request& req);
  void cmd_auth(const proto::Request& req);
  void reply_error(Errc code, std::string_view message);
  void reply_result_error(const Error& e);

  Server& server_;
  asio::ip::tcp::socket socket_;
  // TLS over socket_ (connections from the TLS listener only).
  std::unique_ptr<asio::ssl::stream<asio::ip::tcp::socket&>> tls_;
  bool first_read_ = true;
  core::SessionId session_;
  proto::RequestParser parser_;
  std::deque<proto::Request> pending_;
  std::size_t pending_bytes_ = 0;  // of pending_ (request_bytes)
  bool parked_ = false;
  std::uint64_t park_id_ = 0;
  bool authed_ = false;
  // The user this connection AUTHed as (null: no users, or the
  // requirepass password: every command allowed).
  const User* user_ = nullptr;
  // False (and a permission_denied reply sent) if user_ may not run `req`.
  bool permitted(std::string_view cmd, const proto::Request& req);
  // A failed AUTH: answered after auth_fail_delay, later requests wait.
  void auth_failed(std::string message);
  bool had_ephemeral_ = false;
  bool close_after_flush_ = false;
  bool closed_ = false;
  std::deque<Staged> staged_;
  std::size_t staged_bytes_ = 0;  // of staged_ replies
  // Output not yet written: full chunks (backlog_, oldest first), then
  // out_. Bounded chunks instead of one growing string: no doubling copy of
  // a large backlog, and written chunks are freed.
  std::string out_, writing_;
  std::deque<std::string> backlog_;
  std::size_t backlog_bytes_ = 0;
  bool write_in_flight_ = false;
  bool in_batch_ = false;      // read_loop is executing a batch of requests
  bool peer_checked_ = false;  // peer_closed() polled in this batch
  bool peer_gone_ = false;     // the peer closed or reset the connection
  std::size_t dropped_ = 0;    // acquires not executed: the peer had gone
  bool held_much_ = false;     // held over kTrimAfterBytes at some point
  // LOCK.WATCH: the prefix this connection watches (empty optional: none
  // yet) and the table's change_count() it last answered with; a change
  // after that answer is reported by the next LOCK.WATCH (none is lost).
  std::optional<std::string> watch_prefix_;
  std::uint64_t watch_seen_ = 0;
  friend class Server;  // watch.cc: answers a parked watch
};

}  // namespace baton::server

#endif  // BATON_SERVER_CONNECTION_H_
