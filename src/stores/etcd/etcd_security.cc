// stores/etcd/etcd_security.cc — TLS and login options of the etcd://
// store, and its check at open (etcd_security.h).
#include "stores/etcd/etcd_security.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/duration.h"
#include "stores/tls/tls_client.h"

namespace baton::store::etcd {
namespace {

using std::chrono::steady_clock;

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return static_cast<bool>(in) || in.eof();
}

// A descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A TCP connection to host:port made by `deadline` (-1: none; a member that
// is down or unreachable).
int connect_tcp(const std::string& host, const std::string& port,
                SteadyTime deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(res,
                                                            &::freeaddrinfo);
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    Fd s;
    s.fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    a->ai_protocol);
    if (s.fd < 0) continue;
    if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) continue;
      const auto left = std::chrono::duration_cast<milliseconds>(
          deadline - steady_clock::now());
      pollfd p{s.fd, POLLOUT, 0};
      if (left.count() <= 0 ||
          ::poll(&p, 1, static_cast<int>(left.count())) != 1) {
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
          err != 0) {
        continue;
      }
    }
    return std::exchange(s.fd, -1);
  }
  return -1;
}

// The reason to refuse the open that a TLS handshake with the store's own
// files finds at `address` ("host:port", "[v6]:port"), or "" (the member
// is down, or TLS went through, or it is no TLS matter).
std::string look_into(const std::string& address, const TlsFiles& files,
                      SteadyTime deadline) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return "";
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') {
    host = host.substr(1, host.size() - 2);
  }
  Fd s;
  s.fd = connect_tcp(host, address.substr(colon + 1), deadline);
  if (s.fd < 0) return "";
  tls::TlsOptions to;
  if (files.on) to = {files.ca, files.cert, files.key};
  auto ctx = tls::TlsContext::create(to);
  if (!ctx.ok()) return "";
  tls::TlsPeer peer;
  peer.host = host;
  peer.where = address;
  peer.plain_port_hint =
      " (the server did not answer with TLS: is this a plain-text port? "
      "write etcd:// without tls for it)";
  peer.client_cert_hint =
      " (the server requires a client certificate its CA signed: give "
      "cert= and key=)";
  auto ch = tls::TlsChannel::handshake(*ctx, s.fd, peer, deadline);
  if (!files.on) {
    // A plain-text client: does the server speak TLS? A certificate (even
    // one the system CAs do not know) says it does.
    if (ch.ok() ||
        ch.error().message().find("server certificate:") != std::string::npos) {
      return "etcd:// at " + address +
             " answers with TLS only: write etcds:// (with ca= for a "
             "private CA)";
    }
    return "";
  }
  if (!ch.ok()) {
    // Only a definite answer refuses the open: the certificate failed
    // verification, the server sent an alert, or it spoke no TLS. A
    // handshake that timed out or was cut (a loaded or restarting member)
    // proves nothing.
    const std::string& m = ch.error().message();
    bool definite = false;
    for (const char* why :
         {"server certificate:", "alert", "wrong version number",
          "packet length too long", "record layer failure"}) {
      definite = definite || m.find(why) != std::string::npos;
    }
    if (!definite) return "";
    return "etcd:// " + m +
           (m.find("plain-text port") == std::string::npos
                ? "; check ca, cert and key"
                : "");
  }
  // Over TLS 1.3 a server refuses the client's certificate (or its
  // absence) after the handshake, with an alert read here. Nothing to read
  // within the wait: the session stands.
  char byte = 0;
  auto r = (*ch)->read_some(
      &byte, 1, std::min(deadline, steady_clock::now() + milliseconds(300)));
  if (!r.ok() && r.error().message().find("alert") != std::string::npos) {
    return "etcd:// " + r.error().message() +
           (files.cert.empty()
                ? " (the server requires a client certificate: give cert= "
                  "and key=)"
                : " (the server refused the client certificate: is it "
                  "signed by a CA of the server's --trusted-ca-file?)");
  }
  return "";
}

}  // namespace

std::vector<OptionSpec> security_options() {
  std::vector<OptionSpec> v = {
      flag_option("tls", "0",
                  "etcd:// only: 1 = TLS (the same as writing etcds://)"),
      file_option("ca",
                  "TLS only: PEM file of the CA(s) the server's certificate "
                  "must chain to (default: the system CAs)"),
      file_option("cert",
                  "TLS only: client certificate (PEM), with key; etcd with "
                  "--client-cert-auth takes its CN as the user when no user "
                  "is given"),
      file_option("key", "TLS only: the client certificate's key (PEM)"),
  };
  for (auto& p : password_options(kPasswordEnv)) v.push_back(std::move(p));
  v.push_back(duration_option(
      "token_refresh", "240s",
      "with a user: log in again when etcd's token is this old (1s .. 24h; "
      "below the server's --auth-token-ttl, 300s by default)"));
  return v;
}

Status security_of(const StoreUrl& url, Conn::Options* conn, TlsFiles* files) {
  const OptionValues& o = url.options;
  const bool etcds = url.scheme == "etcds";
  if (etcds && o.given("tls") && !o.flag("tls")) {
    return bad_url(url,
                   "tls=0 contradicts etcds:// (always TLS); write etcd:// for "
                   "plain text");
  }
  files->on = etcds || o.flag("tls");
  for (const char* k : {"ca", "cert", "key"}) {
    if (!files->on && o.given(k)) {
      return bad_url(url, std::string(k) +
                              " is a TLS option but TLS is off (write etcds:// "
                              "or add tls=1)");
    }
  }
  if (files->on) {
    if (o.given("ca")) files->ca = o.text("ca");
    if (o.given("cert")) files->cert = o.text("cert");
    if (o.given("key")) files->key = o.text("key");
    // OpenSSL reads them now, so that a key that does not belong to its
    // certificate, or a file that is no PEM, is refused by name here (gRPC
    // would only fail its handshakes).
    auto checked =
        tls::TlsContext::create({files->ca, files->cert, files->key});
    if (!checked.ok()) return bad_url(url, checked.error().message());
    const std::pair<const std::string*, std::string*> pems[] = {
        {&files->ca, &conn->ca_pem},
        {&files->cert, &conn->cert_pem},
        {&files->key, &conn->key_pem}};
    for (const auto& [path, pem] : pems) {
      if (!path->empty() && !read_file(*path, pem)) {
        return bad_url(url,
                       "cannot read " + *path + ": " + std::strerror(errno));
      }
    }
    conn->tls = true;
  }
  const bool password_given =
      !url.password.empty() || o.given("password") || o.given("password_file");
  if (url.user.empty()) {
    if (password_given) {
      return bad_url(url,
                     "a password needs a user: write etcds://USER@host:port/"
                     "prefix (the password in password_file= or "
                     "$ETCDCTL_PASSWORD)");
    }
    return {};
  }
  auto pw = store_password(url, kPasswordEnv);
  if (!pw.ok()) return std::move(pw).error();
  if (pw->empty()) {
    return bad_url(url,
                   "user \"" + url.user +
                       "\" needs a password: give password_file=, password= "
                       "or $ETCDCTL_PASSWORD");
  }
  conn->user = url.user;
  conn->password = std::move(*pw);
  const milliseconds refresh = o.duration("token_refresh");
  if (refresh < milliseconds(1000) || refresh > milliseconds(86400000)) {
    return bad_url(url, "token_refresh " + core::format_duration(refresh) +
                            " is out of range (1s .. 24h)");
  }
  conn->token_refresh = refresh;
  return {};
}

Status check_at_open(Conn& conn, const std::string& prefix,
                     const TlsFiles& files) {
  // Connect now, not in the first call: gRPC sets up a channel (and, in a
  // fresh process, itself) lazily, and that first time was seen to outlast
  // a short acquire's deadline. With a user this is also the first login.
  const CallContext ctx(
      steady_clock::now() +
      std::min(conn.options().request_timeout, milliseconds(2000)));
  pb::RangeRequest probe;
  probe.set_key(prefix + "/");  // one key: in the role's range, and cheap
  probe.set_count_only(true);
  // One pass first: a failure that is TLS's is refused at once, not after
  // the retries of the whole wait.
  auto r = conn.range(probe, ctx, /*one_pass=*/true);
  if (r.ok()) return {};
  const Errc code = r.error().code();
  if (code == Errc::permission_denied) return std::move(r).error();
  if (code != Errc::unavailable && code != Errc::timeout) return {};
  // No member answered: find out whether TLS is why (bounded: 1 s a
  // member, 2 s in all).
  const SteadyTime until = steady_clock::now() + milliseconds(2000);
  for (const auto& address : conn.options().endpoints) {
    const SteadyTime by =
        std::min(until, steady_clock::now() + milliseconds(1000));
    if (steady_clock::now() >= by) break;
    std::string why = look_into(address, files, by);
    if (!why.empty()) return Error(Errc::unavailable, std::move(why));
  }
  // Not TLS: members down or electing. The rest of the wait as before (a
  // login refused meanwhile still refuses the open).
  r = conn.range(probe, ctx);
  if (!r.ok() && r.error().code() == Errc::permission_denied) {
    return std::move(r).error();
  }
  return {};
}

Error bad_url(const StoreUrl& url, const std::string& what) {
  return Error(Errc::invalid_argument,
               "store URL \"" + url.safe + "\": " + what);
}

}  // namespace baton::store::etcd
