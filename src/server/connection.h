// server/connection.h — one client connection of batond (one session).
//
// Requests are answered strictly in order. While a blocking request is
// parked, later requests are buffered (not executed) and the socket is still
// read, so a close is noticed at once and the session's waiters leave the
// queue. Replies are staged with the journal sequence they depend on and
// written once that sequence is durable; if persistence fails, a staged
// grant is undone and answered `unavailable` instead.
//
// Thread safety: io thread only.
#ifndef BATON_SERVER_CONNECTION_H_
#define BATON_SERVER_CONNECTION_H_

#include <asio.hpp>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "proto/resp.h"
#include "server/server.h"

namespace baton::server {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server& server, asio::ip::tcp::socket socket,
             core::SessionId session);
  void start();
  void close();
  bool closed() const { return closed_; }
  core::SessionId session() const { return session_; }

  // A staged reply: sent when the journal covers every change made so far
  // (or, with durable = false, as soon as the replies before it are sent).
  // `grants` are the leases it acknowledges (released if persistence fails).
  void reply(std::string bytes,
             std::vector<std::pair<std::string, OwnerToken>> grants = {},
             bool durable = true);
  // Completes the parked request `id` with a reply and resumes the queue.
  void complete_parked(std::uint64_t id, std::string bytes,
                       std::vector<std::pair<std::string, OwnerToken>> grants);
  // Moves durable staged replies to the socket (or fails them).
  void release(std::uint64_t durable_seq, bool failed,
               const std::string& failure);
  bool has_staged() const { return !staged_.empty(); }

 private:
  struct Staged {
    std::uint64_t seq;
    std::string bytes;
    std::vector<std::pair<std::string, OwnerToken>> grants;
  };
  asio::awaitable<void> read_loop();
  void process_pending();
  void execute(const proto::Request& req);  // commands.cc
  void flush();

  // commands.cc
  void cmd_acquire(const proto::Request& req);
  void cmd_extend(const proto::Request& req);
  void cmd_release(const proto::Request& req);
  void cmd_describe(const proto::Request& req);
  void cmd_list(const proto::Request& req);
  void cmd_multi(const proto::Request& req, bool all);
  void cmd_counter(const proto::Request& req);
  void cmd_hello(const proto::Request& req);
  void cmd_auth(const proto::Request& req);
  void reply_error(Errc code, std::string_view message);
  void reply_result_error(const Error& e);

  Server& server_;
  asio::ip::tcp::socket socket_;
  core::SessionId session_;
  proto::RequestParser parser_;
  std::deque<proto::Request> pending_;
  bool parked_ = false;
  std::uint64_t park_id_ = 0;
  bool authed_ = false;
  bool had_ephemeral_ = false;
  bool close_after_flush_ = false;
  bool closed_ = false;
  std::deque<Staged> staged_;
  std::string out_, writing_;
  bool write_in_flight_ = false;
  bool in_batch_ = false;  // read_loop is executing a batch of requests
};

}  // namespace baton::server

#endif  // BATON_SERVER_CONNECTION_H_
