// tests/support/tcp_proxy.h — an in-process TCP fault proxy for tests.
//
// TcpProxy listens on 127.0.0.1 and forwards each accepted connection to an
// upstream server, so that a test can put faults between a client and a real
// server without touching either:
//
//   mode pass       forward both ways (plus set_delay(), each direction).
//   mode blackhole  keep accepting and reading both sides, forward nothing
//                   either way; data queued for delay is dropped. Peers see a
//                   silent network: no reply, no EOF, no reset.
//   mode refuse     reset every current connection and every new one at once
//                   (like a server that is down: connect "works", then RST).
//   cut_all()       reset (SO_LINGER 0) every current connection, both sides;
//                   the mode is unchanged, new connections are served.
//
// set_mode(), set_delay(), cut_all() and set_upstream() apply before they
// return: once set_mode(Mode::blackhole) returns, no further byte is
// forwarded on any connection. A new connection whose upstream cannot be
// reached is reset (in pass mode) or kept silent (in blackhole mode).
//
// Thread safety: every member may be called from any thread. The proxy owns
// one I/O thread (poll(2) over non-blocking POSIX sockets); the destructor
// stops and joins it and closes every socket. Loopback only; every queue is
// bounded (reading from a side pauses while 1 MiB waits to go the other way).
#ifndef BATON_TESTS_SUPPORT_TCP_PROXY_H_
#define BATON_TESTS_SUPPORT_TCP_PROXY_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "baton/error.h"

namespace baton::testing {

class TcpProxy {
 public:
  // blackhole: accept and read but forward nothing either way;
  // refuse: close new connections at once (and reset the current ones).
  enum class Mode { pass, blackhole, refuse };

  // Listens on 127.0.0.1 (port 0 = free port), forwards to
  // upstream_host:upstream_port. invalid_argument if the host does not
  // resolve, unavailable if the listening socket cannot be set up.
  static Result<std::unique_ptr<TcpProxy>> start(
      const std::string& upstream_host, std::uint16_t upstream_port,
      std::uint16_t listen_port = 0);

  // The port the proxy listens on (127.0.0.1).
  std::uint16_t port() const;
  // Applies to existing and new connections.
  void set_mode(Mode m);
  // Added to every forwarded chunk, each direction (0 = none).
  void set_delay(std::chrono::milliseconds one_way);
  // Resets (SO_LINGER 0) every current connection, both sides.
  void cut_all();
  // For restarted servers on a new port; applies to new connections.
  void set_upstream(const std::string& host, std::uint16_t port);
  // Connections currently open (accepted and not yet closed).
  std::size_t connections() const;

  ~TcpProxy();  // stops and joins, closes everything
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

 private:
  struct Impl;
  explicit TcpProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_TCP_PROXY_H_
