// tests/server/baton_tls_test.cc — batons:// and batond's TLS listener: the
// failures an operator meets (wrong CA, expired certificates, a name the
// certificate does not carry, a plain client on the TLS port and a TLS
// client on the plain port) each give a clear error on the client and a log
// line on batond. Runs in the conformance_baton binary against its batond
// (baton_test_server.h); the server-certificate cases use `openssl
// s_server` as the server, since batond's own certificate is valid.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "baton_test_server.h"
#include "direct_store.h"
#include "eventually.h"

namespace baton::testing {
namespace {

Result<std::unique_ptr<DirectStore>> open_store(const std::string& url) {
  return DirectStore::open(url);
}

// The error of opening `url` or, if it opens, of one call on it.
Error call_error(const std::string& url) {
  // With TLS the store makes one connection at open, so a certificate
  // problem is open()'s error; otherwise the first call's.
  auto s = open_store(url);
  if (!s) return s.error();
  auto r = (*s)->describe("tls/x");
  if (r) {
    ADD_FAILURE() << "describe over " << url << " succeeded";
    return Error(Errc::internal, "succeeded");
  }
  return r.error();
}

bool server_logged(const std::string& text) {
  return eventually(
      [&] { return test_server().output().find(text) != std::string::npos; });
}

// `openssl s_server` on a free loopback port with `cert`/`key`, for one
// connection; stopped by pid.
class OpensslServer {
 public:
  OpensslServer(const std::string& cert, const std::string& key) {
    const std::string log = test_certs().path("s_server.log");
    std::remove(log.c_str());
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      // -www: answers by itself (never reads stdin, whose end would
      // close the connection).
      ::execlp("openssl", "openssl", "s_server", "-www", "-naccept", "1",
               "-accept", "127.0.0.1:0", "-cert", cert.c_str(), "-key",
               key.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Its "ACCEPT 127.0.0.1:<port>" line (bounded wait).
    eventually([&] {
      std::string out = run("cat " + log + " 2>/dev/null");
      auto at = out.find("ACCEPT 127.0.0.1:");
      if (at == std::string::npos) return false;
      port_ = std::atoi(out.c_str() + at + 17);
      return port_ != 0;
    });
  }
  ~OpensslServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string tls_query(const std::string& ca) {
  TestCertificates& c = test_certs();
  return "?ca=" + c.path(ca) + "&cert=" + c.path("client.pem") +
         "&key=" + c.path("client.key") + "&timeout_ms=3000";
}

TEST(BatonTls, ServerCertificateNamesLocalhostToo) {
  auto s = open_store(batons_url("localhost"));
  ASSERT_TRUE(s) << s.error().to_string();
  auto r = (*s)->describe("tls/x");
  EXPECT_TRUE(r) << r.error().to_string();
}

TEST(BatonTls, WrongCaIsNamed) {
  const std::string url =
      "batons://127.0.0.1:" + std::to_string(test_server().tls_port()) +
      tls_query("other_ca.pem");
  Error e = call_error(url);
  EXPECT_EQ(e.code(), Errc::unavailable);
  EXPECT_NE(e.message().find("TLS handshake with batond at 127.0.0.1:"),
            std::string::npos)
      << e.message();
  EXPECT_NE(
      e.message().find(
          "server certificate: self-signed certificate in certificate chain"),
      std::string::npos)
      << e.message();
  EXPECT_TRUE(server_logged("alert unknown ca")) << test_server().output();
}

TEST(BatonTls, ExpiredClientCertificateIsNamed) {
  TestCertificates& c = test_certs();
  const std::string url =
      "batons://127.0.0.1:" + std::to_string(test_server().tls_port()) +
      "?ca=" + c.path("ca.pem") + "&cert=" + c.path("expired_client.pem") +
      "&key=" + c.path("client.key") + "&timeout_ms=3000";
  Error e = call_error(url);
  EXPECT_EQ(e.code(), Errc::unavailable);
  EXPECT_NE(e.message().find("certificate expired"), std::string::npos)
      << e.message();
  EXPECT_TRUE(server_logged("(client certificate: certificate has expired)"))
      << test_server().output();
}

TEST(BatonTls, MissingClientCertificateIsNamed) {
  const std::string url =
      "batons://127.0.0.1:" + std::to_string(test_server().tls_port()) +
      "?ca=" + test_certs().path("ca.pem") + "&timeout_ms=3000";
  Error e = call_error(url);
  EXPECT_EQ(e.code(), Errc::unavailable);
  EXPECT_NE(e.message().find("certificate required"), std::string::npos)
      << e.message();
  EXPECT_TRUE(server_logged("peer did not return a certificate"))
      << test_server().output();
}

TEST(BatonTls, ExpiredServerCertificateIsNamed) {
  TestCertificates& c = test_certs();
  OpensslServer s(c.path("expired_server.pem"), c.path("server.key"));
  ASSERT_NE(s.port(), 0) << "openssl s_server did not start";
  Error e = call_error("batons://127.0.0.1:" + std::to_string(s.port()) +
                       tls_query("ca.pem"));
  EXPECT_EQ(e.code(), Errc::unavailable);
  EXPECT_NE(e.message().find("server certificate: certificate has expired"),
            std::string::npos)
      << e.message();
}

TEST(BatonTls, CertificateForAnotherNameIsRefused) {
  TestCertificates& c = test_certs();
  OpensslServer s(c.path("othername.pem"), c.path("server.key"));
  ASSERT_NE(s.port(), 0) << "openssl s_server did not start";
  Error e = call_error("batons://127.0.0.1:" + std::to_string(s.port()) +
                       tls_query("ca.pem"));
  EXPECT_EQ(e.code(), Errc::unavailable);
  EXPECT_NE(e.message().find("server certificate: IP address mismatch"),
            std::string::npos)
      << e.message();
}

TEST(BatonTls, PlainClientOnTlsPortIsNamed) {
  Error e = call_error(
      "baton://127.0.0.1:" + std::to_string(test_server().tls_port()) +
      "?timeout_ms=3000");
  EXPECT_EQ(e.code(), Errc::unavailable);
  EXPECT_NE(e.message().find("this is batond's TLS port"), std::string::npos)
      << e.message();
  EXPECT_TRUE(server_logged("the client speaks plain text, not TLS"))
      << test_server().output();
}

TEST(BatonTls, TlsClientOnPlainPortIsNamed) {
  Error e =
      call_error("batons://127.0.0.1:" + std::to_string(test_server().port()) +
                 tls_query("ca.pem"));
  EXPECT_EQ(e.code(), Errc::unavailable);
  EXPECT_NE(e.message().find("did not answer with TLS: is this batond's "
                             "plain-text port?"),
            std::string::npos)
      << e.message();
  EXPECT_TRUE(server_logged("on the plain-text listener"))
      << test_server().output();
}

TEST(BatonTls, BadOptionsAreRefusedAtOpen) {
  const std::string base =
      "batons://127.0.0.1:" + std::to_string(test_server().tls_port());
  auto unknown = open_store(base + "?cafile=x");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code(), Errc::invalid_argument);
  EXPECT_NE(unknown.error().message().find("unknown option \"cafile\""),
            std::string::npos)
      << unknown.error().message();

  auto plain = open_store("baton://127.0.0.1:1?ca=/x.pem");
  ASSERT_FALSE(plain);
  EXPECT_NE(plain.error().message().find("TLS options need batons://"),
            std::string::npos)
      << plain.error().message();

  auto missing = open_store(base + "?ca=/nonexistent/ca.pem");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::invalid_argument);
  EXPECT_NE(missing.error().message().find(
                "ca=/nonexistent/ca.pem: cannot read it: No such file"),
            std::string::npos)
      << missing.error().message();

  auto half = open_store(base + "?cert=" + test_certs().path("client.pem"));
  ASSERT_FALSE(half);
  EXPECT_NE(half.error().message().find("cert and key go together"),
            std::string::npos)
      << half.error().message();
}

TEST(BatonTls, ServerClosingMidWriteIsAnErrorNotSigpipe) {
  // 8 MiB request: batond refuses it past max_request_bytes (1 MiB) and
  // closes while the client still writes. OpenSSL's own socket BIO would
  // raise SIGPIPE (this binary does not ignore it) and kill the process.
  ASSERT_NE(::signal(SIGPIPE, SIG_DFL), SIG_ERR);
  auto s = open_store(batons_url("127.0.0.1", "&timeout_ms=5000"));
  ASSERT_TRUE(s) << s.error().to_string();
  auto r = (*s)->describe(std::string(8u << 20, 'n'));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::unavailable) << r.error().to_string();
  auto ok = (*s)->describe("tls/after");  // a new connection works
  EXPECT_TRUE(ok) << ok.error().to_string();
}

TEST(BatonTls, BatondRefusesBadTlsSettings) {
  TestCertificates& c = test_certs();
  auto start = [](const std::string& flags) {
    return run(BATOND_PATH " --data-dir '' --listen 127.0.0.1:0 " + flags +
               " 2>&1");
  };
  std::string out = start("--tls-listen 127.0.0.1:0");
  EXPECT_NE(out.find("tls_listen 127.0.0.1:0 needs tls_cert_file and "
                     "tls_key_file"),
            std::string::npos)
      << out;
  out = start(
      "--tls-listen 127.0.0.1:0 --tls-cert-file /nonexistent.pem "
      "--tls-key-file " +
      c.path("server.key"));
  EXPECT_NE(out.find("tls_cert_file /nonexistent.pem: cannot read it: No "
                     "such file or directory"),
            std::string::npos)
      << out;
  out = start("--tls-listen 127.0.0.1:0 --tls-cert-file " +
              c.path("server.pem") + " --tls-key-file " + c.path("client.key"));
  EXPECT_NE(out.find("key values mismatch (this key does not belong to "
                     "tls_cert_file)"),
            std::string::npos)
      << out;
  // An expired certificate is named at start (the bad port then stops
  // this batond before it serves).
  out = start("--tls-listen 127.0.0.1:99999 --tls-cert-file " +
              c.path("expired_server.pem") + " --tls-key-file " +
              c.path("server.key"));
  EXPECT_NE(out.find("tls_cert_file " + c.path("expired_server.pem") +
                     " has expired: TLS clients will refuse the handshake"),
            std::string::npos)
      << out;
  out = start("--tls-cert-file " + c.path("server.pem"));
  EXPECT_NE(out.find("are set but tls_listen is not"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("batond ready"), std::string::npos) << out;
}

}  // namespace
}  // namespace baton::testing
