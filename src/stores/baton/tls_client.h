// stores/baton/tls_client.h — TLS for batons:// with OpenSSL directly on
// the store's non-blocking socket: SSL_connect / SSL_read / SSL_write are
// driven by poll(2), each wait bounded by the caller's deadline (rule 7).
// The server's certificate must chain to `ca` (or the system CAs) and name
// the host (DNS name) or the address (IP literal) of the URL.
//
// Thread safety: a TlsContext is shared by the store's connections
// (OpenSSL's SSL_CTX is safe for that); a TlsChannel belongs to one
// connection, used by one thread at a time.
#ifndef BATON_STORES_BATON_TLS_CLIENT_H_
#define BATON_STORES_BATON_TLS_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "baton/error.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace baton::store {

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

 private:
  TlsContext() = default;
  SSL_CTX* ctx_ = nullptr;
};

class TlsChannel {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  // Handshake on the connected non-blocking `fd` (not owned). unavailable
  // with the TLS reason ("TLS handshake with batond at h:p failed: ...").
  static Result<std::unique_ptr<TlsChannel>> handshake(
      std::shared_ptr<TlsContext> ctx, int fd, const std::string& host,
      std::uint16_t port, Deadline deadline);
  ~TlsChannel();
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  Status write_all(std::string_view data, Deadline deadline);
  // Bytes read (0: the server closed the connection).
  Result<std::size_t> read_some(char* buf, std::size_t n, Deadline deadline);
  // Decrypted bytes not yet read.
  bool has_pending() const;

 private:
  TlsChannel() = default;
  // Waits until `fd_` is ready for what SSL_get_error asked; false with
  // *why set when it failed or the deadline passed.
  bool wait(int ssl_error, Deadline deadline, std::string* why);
  std::shared_ptr<TlsContext> ctx_;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  std::string where_;  // "batond at host:port"
};

}  // namespace baton::store

#endif  // BATON_STORES_BATON_TLS_CLIENT_H_
