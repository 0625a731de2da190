#include "server/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace baton::server {

namespace {

std::string openssl_reason() {
  unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  const char* r = ERR_reason_error_string(e);
  return r != nullptr ? r : "OpenSSL error " + std::to_string(e);
}

Error bad_file(const char* key, const std::string& path) {
  std::string why = openssl_reason();
  if (::access(path.c_str(), R_OK) != 0) {
    why = std::string("cannot read it: ") + std::strerror(errno);
  } else if (why == "key values mismatch") {
    why += " (this key does not belong to tls_cert_file)";
  }
  return Error(Errc::invalid_argument,
               std::string(key) + " " + path + ": " + why);
}

}  // namespace

Result<std::unique_ptr<asio::ssl::context>> make_server_tls_context(
    const ServerConfig& c) {
  auto ctx =
      std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* raw = ctx->native_handle();
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  // No session resumption: no tickets sent after the handshake (a client
  // that polls an idle connection must not find unread bytes on it).
  SSL_CTX_set_num_tickets(raw, 0);
  SSL_CTX_set_session_cache_mode(raw, SSL_SESS_CACHE_OFF);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(raw, c.tls_cert_file.c_str()) != 1) {
    return bad_file("tls_cert_file", c.tls_cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(raw, c.tls_key_file.c_str(),
                                  SSL_FILETYPE_PEM) != 1) {
    return bad_file("tls_key_file", c.tls_key_file);
  }
  if (X509* cert = SSL_CTX_get0_certificate(raw);
      cert != nullptr && X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    // Clients will refuse it ("certificate has expired"); say so at start.
    spdlog::warn(
        "tls_cert_file {} has expired: TLS clients will refuse the "
        "handshake until it is replaced",
        c.tls_cert_file);
  }
  if (SSL_CTX_check_private_key(raw) != 1) {
    return Error(Errc::invalid_argument, "tls_key_file " + c.tls_key_file +
                                             " does not match tls_cert_file " +
                                             c.tls_cert_file + ": " +
                                             openssl_reason());
  }
  if (!c.tls_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(raw, c.tls_ca_file.c_str(), nullptr) !=
        1) {
      return bad_file("tls_ca_file", c.tls_ca_file);
    }
    SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       nullptr);
  }
  return ctx;
}

std::string tls_failure(const std::error_code& ec, SSL* ssl) {
  std::string why = ec.message();
  if (ssl != nullptr) {
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
      why += std::string(" (client certificate: ") +
             X509_verify_cert_error_string(v) + ")";
    }
  }
  return why;
}

std::string peer_common_name(SSL* ssl) {
  if (SSL_get_verify_result(ssl) != X509_V_OK) return std::string();
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return std::string();
  char buf[256] = {0};
  int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName,
                                    buf, sizeof buf);
  X509_free(cert);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace baton::server
