// stores/tls/tls_client.cc — OpenSSL on a store connection's socket.
#include "stores/tls/tls_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace baton::store::tls {
namespace {

// OpenSSL's reason for the last failure (and clears the queue).
std::string openssl_reason() {
  unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0) return std::string();
  const char* r = ERR_reason_error_string(e);
  return r != nullptr ? r : "OpenSSL error " + std::to_string(e);
}

Error bad_file(const char* key, const std::string& path) {
  std::string why = openssl_reason();
  if (::access(path.c_str(), R_OK) != 0) {
    why = std::string("cannot read it: ") + std::strerror(errno);
  } else if (why == "key values mismatch") {
    why += " (this key does not belong to cert)";
  }
  return Error(Errc::invalid_argument,
               std::string("TLS option ") + key + "=" + path + ": " + why);
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

int ms_left(TlsChannel::Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 2'000'000'000 ? 2'000'000'000
                                      : static_cast<int>(left.count()) + 1;
}

// A socket BIO that sends with MSG_NOSIGNAL (OpenSSL's own uses write(2),
// which raises SIGPIPE when the server has closed the connection). The fd
// is not owned.
int fd_of(BIO* b) {
  return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b)));
}

int bio_write(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  ssize_t n =
      ::send(fd_of(b), data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_write(b);
  }
  return static_cast<int>(n);
}

int bio_read(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  ssize_t n = ::recv(fd_of(b), data, static_cast<std::size_t>(len), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(b);
  }
  return static_cast<int>(n);
}

long bio_ctrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

const BIO_METHOD* nosignal_socket_method() {
  static BIO_METHOD* m = [] {
    BIO_METHOD* mm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
                                  "baton nosignal socket");
    BIO_meth_set_write(mm, bio_write);
    BIO_meth_set_read(mm, bio_read);
    BIO_meth_set_ctrl(mm, bio_ctrl);
    BIO_meth_set_create(mm, bio_create);
    return mm;
  }();
  return m;
}

// Why the last SSL call failed (SSL_get_error's `err`), "" when it only
// needs the socket to become readable/writable.
std::string failure(int err) {
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return "";
  if (err == SSL_ERROR_ZERO_RETURN) return "the server closed the TLS session";
  if (err == SSL_ERROR_SYSCALL) {
    std::string r = openssl_reason();
    if (!r.empty()) return r;
    if (errno != 0) return std::strerror(errno);
    return "the server closed the connection";
  }
  std::string r = openssl_reason();
  return r.empty() ? "TLS error " + std::to_string(err) : r;
}

// Waits for the socket as SSL_get_error asked; false with *why on timeout.
bool wait_for(int fd, int err, TlsChannel::Deadline deadline,
              std::string* why) {
  const short events = err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
  for (;;) {
    const int ms = ms_left(deadline);
    if (ms == 0) {
      *why = "timed out";
      return false;
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, ms);
    if (rc > 0) return true;
    if (rc < 0 && errno == EINTR) continue;
    *why = rc == 0 ? "timed out" : std::string("poll: ") + std::strerror(errno);
    return false;
  }
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::create(const TlsOptions& o) {
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->opts_ = o;
  ERR_clear_error();
  c->ctx_ = SSL_CTX_new(TLS_client_method());
  if (c->ctx_ == nullptr) {
    return Error(Errc::internal, "SSL_CTX_new: " + openssl_reason());
  }
  SSL_CTX_set_min_proto_version(c->ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(c->ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (!o.ca.empty()) {
    if (SSL_CTX_load_verify_locations(c->ctx_, o.ca.c_str(), nullptr) != 1) {
      return bad_file("ca", o.ca);
    }
  } else if (SSL_CTX_set_default_verify_paths(c->ctx_) != 1) {
    return Error(Errc::invalid_argument,
                 "TLS: cannot load the system CAs: " + openssl_reason());
  }
  if (o.cert.empty() != o.key.empty()) {
    return Error(Errc::invalid_argument,
                 "TLS options cert and key go together (a client certificate "
                 "needs its key)");
  }
  if (!o.cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(c->ctx_, o.cert.c_str()) != 1) {
      return bad_file("cert", o.cert);
    }
    if (SSL_CTX_use_PrivateKey_file(c->ctx_, o.key.c_str(), SSL_FILETYPE_PEM) !=
        1) {
      return bad_file("key", o.key);
    }
    if (SSL_CTX_check_private_key(c->ctx_) != 1) {
      return Error(Errc::invalid_argument,
                   "TLS option key=" + o.key + " does not match cert=" +
                       o.cert + ": " + openssl_reason());
    }
  }
  return c;
}

TlsContext::~TlsContext() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

Result<std::unique_ptr<TlsChannel>> TlsChannel::handshake(
    std::shared_ptr<TlsContext> ctx, int fd, TlsPeer peer, Deadline deadline) {
  std::unique_ptr<TlsChannel> t(new TlsChannel());
  t->ctx_ = std::move(ctx);
  t->fd_ = fd;
  t->peer_ = std::move(peer);
  const TlsPeer& p = t->peer_;
  auto fail = [&p](const std::string& why) {
    return Error(
        Errc::unavailable,
        (p.where.empty() ? std::string("TLS handshake failed: ")
                         : "TLS handshake with " + p.where + " failed: ") +
            why);
  };
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return fail(std::string("fcntl: ") + std::strerror(errno));
  }
  ERR_clear_error();
  t->ssl_ = SSL_new(t->ctx_->get());
  if (t->ssl_ == nullptr) return fail(openssl_reason());
  BIO* bio = BIO_new(nosignal_socket_method());
  if (bio == nullptr) return fail(openssl_reason());
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
  SSL_set_bio(t->ssl_, bio, bio);  // the SSL owns the BIO, not the fd
  // The certificate must name what the URL names.
  X509_VERIFY_PARAM* param = SSL_get0_param(t->ssl_);
  if (is_ip_literal(p.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, p.host.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param,
                                    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set1_host(t->ssl_, p.host.c_str());
    SSL_set_tlsext_host_name(t->ssl_, p.host.c_str());
  }
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_connect(t->ssl_);
    if (rc == 1) break;
    const int err = SSL_get_error(t->ssl_, rc);
    std::string why = failure(err);
    if (why.empty()) {
      if (wait_for(fd, err, deadline, &why)) continue;
      if (why == "timed out") why += p.timeout_hint;
      return fail(why);
    }
    const long v = SSL_get_verify_result(t->ssl_);
    if (err == SSL_ERROR_SSL && v != X509_V_OK) {
      const std::string& ca = t->ctx_->options().ca;
      why = std::string("server certificate: ") +
            X509_verify_cert_error_string(v) + " (verified against " +
            (ca.empty() ? std::string("the system CAs") : "ca=" + ca) + ")";
    } else if (why == "wrong version number" ||
               why == "packet length too long" ||
               why == "record layer failure" ||
               why == "the server closed the connection") {
      why += p.plain_port_hint;
    }
    return fail(why);
  }
  return t;
}

TlsChannel::~TlsChannel() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

bool TlsChannel::write_all(const char* data, std::size_t n, Deadline deadline,
                           std::string* why) {
  while (n > 0) {
    ERR_clear_error();
    errno = 0;
    const int w = SSL_write(ssl_, data, static_cast<int>(n));
    if (w > 0) {
      data += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    const int err = SSL_get_error(ssl_, w);
    *why = failure(err);
    if (!why->empty()) return false;
    if (!wait_for(fd_, err, deadline, why)) return false;
  }
  return true;
}

Status TlsChannel::write_all(std::string_view data, Deadline deadline) {
  std::string why;
  if (write_all(data.data(), data.size(), deadline, &why)) return {};
  return Error(Errc::unavailable, "TLS send to " + peer_.where + ": " + why);
}

Result<std::size_t> TlsChannel::read_some(char* buf, std::size_t size,
                                          Deadline deadline) {
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int n = SSL_read(ssl_, buf, static_cast<int>(size));
    if (n > 0) return static_cast<std::size_t>(n);
    const int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_ZERO_RETURN) return std::size_t{0};
    if (err == SSL_ERROR_SYSCALL && errno == 0 && ERR_peek_last_error() == 0) {
      return std::size_t{0};  // closed without close_notify
    }
    std::string why = failure(err);
    if (why.empty() && wait_for(fd_, err, deadline, &why)) continue;
    if (why == "timed out") {
      return Error(Errc::unavailable,
                   "no reply from " + peer_.where + " within the timeout");
    }
    if (why.find("certificate required") != std::string::npos) {
      why += peer_.client_cert_hint;
    }
    return Error(Errc::unavailable,
                 "TLS recv from " + peer_.where + ": " + why);
  }
}

bool TlsChannel::read_available(std::string* out, std::string* why) {
  char buf[16 * 1024];
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int n = SSL_read(ssl_, buf, sizeof buf);
    if (n > 0) {
      out->append(buf, static_cast<std::size_t>(n));
      continue;  // drain: nothing stays buffered inside OpenSSL
    }
    const int err = SSL_get_error(ssl_, n);
    // WANT_WRITE while reading (a key update the socket could not take
    // yet): the caller's next read retries it.
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;
    *why = failure(err);
    if (why->find("certificate required") != std::string::npos) {
      *why += peer_.client_cert_hint;
    }
    return false;
  }
}

bool TlsChannel::has_pending() const { return SSL_pending(ssl_) > 0; }

}  // namespace baton::store::tls
