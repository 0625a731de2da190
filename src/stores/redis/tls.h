// stores/redis/tls.h — TLS for rediss:// and redlock://?tls=1 (internal).
// Debian 12's hiredis (0.14) has no SSL support, so the store does TLS
// itself with OpenSSL on the connection's socket, made non-blocking: the
// handshake, writes of hiredis's output buffer and reads fed to hiredis's
// reply reader are driven by poll(2), each wait bounded by a deadline (the
// caller's call deadline, rule 7). The server's certificate must chain to
// `ca` (or the system CAs) and name the URL's host (DNS name) or address
// (IP literal).
//
// This is a small, deliberate duplicate of stores/baton/tls_client.cc (the
// layer rules keep one store from including another's folder); both follow
// the same verification rules.
//
// Thread safety: a TlsContext is shared by a store's connections (an
// SSL_CTX is safe for that); a TlsSession belongs to one connection, used
// by one thread at a time.
#ifndef BATON_STORES_REDIS_TLS_H_
#define BATON_STORES_REDIS_TLS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "baton/error.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace baton::store::redis {

struct TlsOptions {
  std::string ca, cert, key;  // PEM files; ca empty = the system CAs
};

class TlsContext {
 public:
  // invalid_argument naming the option, the file and OpenSSL's reason.
  static Result<std::shared_ptr<TlsContext>> create(const TlsOptions& o);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  SSL_CTX* get() const { return ctx_; }
  const TlsOptions& options() const { return opts_; }

 private:
  TlsContext() = default;
  SSL_CTX* ctx_ = nullptr;
  TlsOptions opts_;
};

class TlsSession {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  // Makes `fd` (connected, not owned) non-blocking and runs the handshake.
  // Errors are `unavailable` and start with "TLS handshake failed: ";
  // `timeout` when `deadline` was the call deadline and it passed.
  static Result<std::unique_ptr<TlsSession>> handshake(
      std::shared_ptr<TlsContext> ctx, int fd, const std::string& host,
      Deadline deadline);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Sends all of `data`; false with *why set (failure or deadline).
  bool write_all(const char* data, std::size_t n, Deadline deadline,
                 std::string* why);
  // Reads what can be read now without blocking, appending it to *out.
  // Returns false with *why set when the session failed or the server
  // closed it; true otherwise (possibly with nothing read).
  bool read_available(std::string* out, std::string* why);
  // Decrypted bytes buffered inside OpenSSL (poll(2) does not see them).
  bool has_pending() const;

 private:
  TlsSession() = default;
  std::shared_ptr<TlsContext> ctx_;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_TLS_H_
