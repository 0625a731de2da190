// server/tls.h — batond's TLS listener: the server context built from the
// tls_* config keys, and the words a failed handshake is logged with.
//
// Thread safety: the context is built once at start and then only read.
#ifndef BATON_SERVER_TLS_H_
#define BATON_SERVER_TLS_H_

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <memory>
#include <string>

#include "baton/error.h"
#include "server/config.h"

namespace baton::server {

// TLS 1.2 or later; tls_cert_file (chain) and tls_key_file; with
// tls_ca_file, clients must present a certificate that CA signed. Errors
// are invalid_argument naming the key, the file and OpenSSL's reason.
Result<std::unique_ptr<asio::ssl::context>> make_server_tls_context(
    const ServerConfig& config);

// Why a handshake failed: OpenSSL's reason, plus the certificate check's
// verdict on the client certificate when there was one.
std::string tls_failure(const std::error_code& ec, SSL* ssl);

// The subject CN of the peer's verified certificate ("" if none).
std::string peer_common_name(SSL* ssl);

}  // namespace baton::server

#endif  // BATON_SERVER_TLS_H_
