// stores/redis/conn_io.cc — moving a connection's bytes: hiredis's own
// read/write on plain TCP, the TLS session's (tls.h) on rediss://.
#include <poll.h>

#include <string>

#include "stores/redis/conn.h"

namespace baton::store::redis {

// Sends the context's output buffer: hiredis's own write on plain TCP, the
// TLS session's (bounded by `until`) on TLS. false with *why set.
bool flush(Conn* c, std::chrono::steady_clock::time_point until,
           std::string* why) {
  redisContext* ctx = c->get();
  if (!c->tls) {
    for (int done = 0; !done;) {  // a few bytes: the socket buffer takes them
      if (redisBufferWrite(ctx, &done) != REDIS_OK) {
        *why = ctx->errstr;
        return false;
      }
    }
    return true;
  }
  const std::size_t n = sdslen(ctx->obuf);
  if (n == 0) return true;
  if (!c->tls->write_all(ctx->obuf, n, until, why)) return false;
  // Empty it (sds.h's inline helpers: hiredis.h declares its exported sds
  // functions without C linkage, so none of those is called).
  sdssetlen(ctx->obuf, 0);
  ctx->obuf[0] = '\0';
  return true;
}

// Feeds what arrived on the socket to the context's reply reader (hiredis's
// own read on plain TCP; everything OpenSSL can decrypt now on TLS, so
// nothing stays buffered where poll(2) cannot see it). false with *why.
bool read_in(Conn* c, std::string* why) {
  redisContext* ctx = c->get();
  if (!c->tls) {
    if (redisBufferRead(ctx) == REDIS_OK) return true;
    *why = ctx->errstr;
    return false;
  }
  std::string data;
  const bool ok = c->tls->read_available(&data, why);
  if (!data.empty() &&
      redisReaderFeed(ctx->reader, data.data(), data.size()) != REDIS_OK) {
    *why = "cannot buffer the reply";
    return false;
  }
  return ok || !data.empty();  // a close after data: seen by the next read
}

// An idle pooled connection is still usable: nothing to read on plain TCP
// (readable means the server closed it); on TLS, what arrived must be TLS
// housekeeping only (TLS 1.3 session tickets), no data and no close.
bool idle_ok(Conn* c) {
  pollfd p{c->fd(), POLLIN, 0};
  if (::poll(&p, 1, 0) == 0) return true;
  if (!c->tls) return false;
  std::string data, why;
  return c->tls->read_available(&data, &why) && data.empty();
}

// Why a connection failed before its first reply, with the likely cause:
// a TLS port drops a plain client at its first bytes, and a server that
// requires a client certificate drops a TLS 1.3 client after the handshake
// (its alert may or may not arrive before the reset).
void new_connection_hint(const Conn* c, std::string* why) {
  if (c->replied || why->find("client certificate") != std::string::npos) {
    return;
  }
  *why += c->tls ? " (the server closed a new TLS session before any reply: "
                   "does it require a client certificate? give cert= and "
                   "key=)"
                 : " (the server closed a new connection before any reply: "
                   "if this port has TLS on, use rediss://)";
}

}  // namespace baton::store::redis
