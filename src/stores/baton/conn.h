// stores/baton/conn.h — one RESP connection of the baton:// store to batond
// (plain, or TLS for batons://).
//
// Plain connections are blocking sockets bounded by SO_RCVTIMEO/SO_SNDTIMEO,
// so a call is one send and one recv (no poll before each); TLS ones are
// non-blocking, driven by poll (stores/tls/tls_client.h). Replies are
// size-checked (proto::ReplyLimits) before they are decoded. Any failure —
// I/O, a deadline passed, an oversize or malformed reply — marks the
// connection broken: it is dropped, never reused, so a late reply can never
// be read as the answer to a later call.
//
// Thread safety: one thread at a time (the store's pool hands it out).
#ifndef BATON_STORES_BATON_CONN_H_
#define BATON_STORES_BATON_CONN_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "baton/error.h"
#include "proto/resp.h"
#include "stores/tls/tls_client.h"

namespace baton::store::baton_conn {

using Deadline = std::chrono::steady_clock::time_point;

// How every error of Conn::connect that reached no server begins (no
// address, refused, timed out): the store tells "batond is not up" from
// "batond refused us" by it. A string_view, not a std::string: a
// session's background give-back may still connect while the process
// exits, after a static std::string would have been destroyed (ASan saw
// that read in server_deadline_test).
inline constexpr std::string_view kCannotConnect =
    "cannot connect to batond at ";

class Conn {
 public:
  ~Conn();

  // Connects to host:port by `deadline` (with TLS if `tls` is set).
  // unavailable naming batond's address on failure.
  static Result<std::unique_ptr<Conn>> connect(
      const std::string& host, std::uint16_t port, Deadline deadline,
      const std::shared_ptr<tls::TlsContext>& tls);

  // Sends the request `encode` writes and returns batond's reply, or
  // unavailable (the connection is then broken).
  template <typename Encode>
  Result<proto::Reply> call(Encode&& encode, Deadline deadline) {
    out_.clear();
    proto::RespWriter w(out_);
    encode(w);
    return exchange(deadline);
  }

  // The next reply of a request already sent (after an interim reply such
  // as `+queued`), or unavailable (the connection is then broken).
  Result<proto::Reply> next_reply(Deadline deadline);

  // False if the peer closed or sent something while idle. A connection
  // that answered within the last few milliseconds is taken as healthy
  // without asking the kernel (one poll saved per call under load).
  bool healthy() const;
  bool broken() const { return broken_; }
  // The socket (for a shutdown from another thread that ends a wait).
  int fd() const { return fd_; }

 private:
  Conn() = default;
  Result<proto::Reply> exchange(Deadline deadline);
  Error io_error(std::string what);
  Error malformed(const Error& e);
  bool set_timeout(Deadline deadline);

  int fd_ = -1;
  std::unique_ptr<tls::TlsChannel> tls_;  // batons:// (uses fd_, not owning)
  bool first_reply_ = true;               // nothing received yet
  bool broken_ = false;
  std::int64_t timeout_us_ = 0;  // SO_RCVTIMEO/SO_SNDTIMEO now set
  Deadline last_used_{};
  std::string out_;  // request being sent (capacity reused)
  proto::ReplyParser parser_;
};

}  // namespace baton::store::baton_conn

#endif  // BATON_STORES_BATON_CONN_H_
