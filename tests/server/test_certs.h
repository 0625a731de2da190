// tests/server/test_certs.h — a throwaway CA and certificates made at test
// time with the openssl CLI (Debian package openssl) in a temp dir, removed
// at the end: nothing secret is committed. faketime (Debian package
// faketime) back-dates the expired ones.
//
//   ca.pem            the test CA; server.pem/key (IP 127.0.0.1, DNS
//                     localhost) and client.pem/key are signed by it
//   other_ca.pem      a second CA that signed nothing here (a wrong CA)
//   expired_client.pem, expired_server.pem: signed by ca.pem, valid only
//                     on 2020-01-01 (keys client.key / server.key)
//   othername.pem     signed by ca.pem for DNS other.example only (key
//                     server.key)
#ifndef BATON_TESTS_SERVER_TEST_CERTS_H_
#define BATON_TESTS_SERVER_TEST_CERTS_H_

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace baton::testing {

class TestCertificates {
 public:
  TestCertificates() {
    char tmpl[] = "/tmp/baton-certs-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    const std::string key =
        "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    sh("openssl req -x509 " + key +
       " -keyout ca.key -out ca.pem -days 2 -subj '/CN=baton test CA'");
    sh("openssl req -x509 " + key +
       " -keyout other_ca.key -out other_ca.pem -days 2 "
       "-subj '/CN=another CA'");
    sh("openssl req " + key +
       " -keyout server.key -out server.csr -subj '/CN=batond'");
    sh("openssl req " + key +
       " -keyout client.key -out client.csr -subj '/CN=client1'");
    sh("printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext");
    sh("printf 'subjectAltName=DNS:other.example\\n' > other.ext");
    const std::string sign = "openssl x509 -req -CA ca.pem -CAkey ca.key ";
    sh(sign + "-in server.csr -out server.pem -days 2 -extfile server.ext");
    sh(sign + "-in client.csr -out client.pem -days 2");
    sh(sign + "-in server.csr -out othername.pem -days 2 -extfile other.ext");
    sh("faketime '2020-01-01 00:00:00' " + sign +
       "-in client.csr -out expired_client.pem -days 1");
    sh("faketime '2020-01-01 00:00:00' " + sign +
       "-in server.csr -out expired_server.pem -days 1 -extfile server.ext");
    // The back-dating must have worked, or the expiry tests prove nothing.
    sh("openssl x509 -in expired_client.pem -noout -checkend 0 "
       "| grep -q 'will expire'");
  }
  ~TestCertificates() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;

  std::string path(const std::string& file) const { return dir_ + "/" + file; }

 private:
  void sh(const std::string& cmd) {
    const std::string full = "cd '" + dir_ + "' && (" + cmd + ") >>log 2>&1";
    if (std::system(full.c_str()) != 0) {
      throw std::runtime_error("test certificates: `" + cmd + "` failed; see " +
                               dir_ + "/log");
    }
  }
  std::string dir_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_SERVER_TEST_CERTS_H_
