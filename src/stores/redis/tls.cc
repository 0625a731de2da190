// stores/redis/tls.cc — OpenSSL on a hiredis connection's socket.
#include "stores/redis/tls.h"

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

namespace baton::store::redis {
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

int ms_left(TlsSession::Deadline deadline) {
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
                                  "baton redis nosignal socket");
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
bool wait_for(int fd, int err, TlsSession::Deadline deadline,
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

Result<std::unique_ptr<TlsSession>> TlsSession::handshake(
    std::shared_ptr<TlsContext> ctx, int fd, const std::string& host,
    Deadline deadline) {
  std::unique_ptr<TlsSession> t(new TlsSession());
  t->ctx_ = std::move(ctx);
  t->fd_ = fd;
  auto fail = [](const std::string& why) {
    return Error(Errc::unavailable, "TLS handshake failed: " + why);
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
  if (is_ip_literal(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param,
                                    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set1_host(t->ssl_, host.c_str());
    SSL_set_tlsext_host_name(t->ssl_, host.c_str());
  }
  const char* not_tls =
      " (the server did not answer with TLS: is this a plain-text port? "
      "use redis:// for it)";
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_connect(t->ssl_);
    if (rc == 1) break;
    const int err = SSL_get_error(t->ssl_, rc);
    std::string why = failure(err);
    if (why.empty()) {
      if (wait_for(fd, err, deadline, &why)) continue;
      if (why == "timed out") {
        why +=
            " (no TLS answer in time: a slow server or network, or a "
            "plain-text port? use redis:// for that)";
      }
      return fail(why);
    }
    const long v = SSL_get_verify_result(t->ssl_);
    if (err == SSL_ERROR_SSL && v != X509_V_OK) {
      const auto& ca = t->ctx_->options().ca;
      why = std::string("TLS verification of the server certificate failed: ") +
            X509_verify_cert_error_string(v) +
            (ca.empty() ? " (against the system CAs)" : " (ca=" + ca + ")");
    } else if (why == "wrong version number" ||
               why == "packet length too long" ||
               why == "record layer failure" ||
               why == "the server closed the connection") {
      why += not_tls;
    }
    return fail(why);
  }
  return t;
}

TlsSession::~TlsSession() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

bool TlsSession::write_all(const char* data, std::size_t n, Deadline deadline,
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

bool TlsSession::read_available(std::string* out, std::string* why) {
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
      *why +=
          " (the server requires a client certificate: give cert= and "
          "key=)";
    }
    return false;
  }
}

bool TlsSession::has_pending() const { return SSL_pending(ssl_) > 0; }

}  // namespace baton::store::redis
