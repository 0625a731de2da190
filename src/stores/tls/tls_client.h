// stores/tls/tls_client.h — the TLS client of the network stores that do
// TLS themselves: batons:// (the baton store) and rediss:// /
// redlock://?tls=1 (Debian 12's hiredis 0.14 has no SSL). OpenSSL runs
// directly on the store's connected socket, made non-blocking: the
// handshake, writes and reads are driven by poll(2), each wait bounded by a
// deadline (the caller's call deadline, rule 7). The server's certificate
// must chain to `ca` (or the system CAs) and name the URL's host (DNS name)
// or address (IP literal). One copy for both stores (it was two before).
//
// Thread safety: a TlsContext is shared by a store's connections (an
// SSL_CTX is safe for that); a TlsChannel belongs to one connection, used
// by one thread at a time.
#ifndef BATON_STORES_TLS_TLS_CLIENT_H_
#define BATON_STORES_TLS_TLS_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "baton/error.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace baton::store::tls {

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

// Who the channel talks to, for verification and for the errors' wording.
struct TlsPeer {
  std::string host;   // verified against the certificate (DNS name or IP)
  std::string where;  // "batond at h:p"; empty: the caller names the server
  // Appended when the server did not answer with TLS (a plain-text port).
  std::string plain_port_hint;
  // Appended when the handshake timed out (empty: nothing).
  std::string timeout_hint;
  // Appended when the server refused us for lack of a client certificate.
  std::string client_cert_hint;
};

class TlsChannel {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  // Makes `fd` (connected, not owned) non-blocking and runs the handshake.
  // unavailable "TLS handshake [with <where>] failed: <why>"; a certificate
  // that fails verification says "server certificate: <reason> (verified
  // against ca=<file> | the system CAs)".
  static Result<std::unique_ptr<TlsChannel>> handshake(
      std::shared_ptr<TlsContext> ctx, int fd, TlsPeer peer, Deadline deadline);
  ~TlsChannel();
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  // Sends all of `data`; false with *why set (failure or deadline).
  bool write_all(const char* data, std::size_t n, Deadline deadline,
                 std::string* why);
  // The same as a Status: unavailable "TLS send to <where>: <why>".
  Status write_all(std::string_view data, Deadline deadline);
  // Bytes read, waiting up to `deadline` (0: the server closed the
  // connection). unavailable naming <where> on failure or timeout.
  Result<std::size_t> read_some(char* buf, std::size_t n, Deadline deadline);
  // Reads what can be read now without blocking, appending it to *out.
  // false with *why set when the session failed or the server closed it;
  // true otherwise (possibly with nothing read).
  bool read_available(std::string* out, std::string* why);
  // Decrypted bytes buffered inside OpenSSL (poll(2) does not see them).
  bool has_pending() const;

 private:
  TlsChannel() = default;
  std::shared_ptr<TlsContext> ctx_;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  TlsPeer peer_;
};

}  // namespace baton::store::tls

#endif  // BATON_STORES_TLS_TLS_CLIENT_H_
