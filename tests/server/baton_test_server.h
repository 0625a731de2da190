// tests/server/baton_test_server.h — the one batond of the conformance_baton
// binary: a plain listener and a TLS listener (client certificates signed by
// the test CA required), started on first use, stopped at exit.
#ifndef BATON_TESTS_SERVER_BATON_TEST_SERVER_H_
#define BATON_TESTS_SERVER_BATON_TEST_SERVER_H_

#include <cstdlib>
#include <string>

#include "batond_process.h"
#include "test_certs.h"

namespace baton::testing {

inline TestCertificates& test_certs() {
  static auto* c = new TestCertificates();
  return *c;
}

inline BatondProcess& test_server() {
  static BatondProcess* p = [] {
    TestCertificates& c = test_certs();
    auto* s = new BatondProcess(
        "",
        {"--tls-listen", "127.0.0.1:0", "--tls-cert-file", c.path("server.pem"),
         "--tls-key-file", c.path("server.key"), "--tls-ca-file",
         c.path("ca.pem")},
        /*keep_output=*/true);
    std::atexit([] {
      delete p;
      delete &test_certs();
    });
    return s;
  }();
  return *p;
}

// batons:// to the TLS listener with the test CA and client certificate;
// `query` (e.g. "&timeout_ms=1000") is appended.
inline std::string batons_url(const std::string& host = "127.0.0.1",
                              const std::string& query = "") {
  TestCertificates& c = test_certs();
  return "batons://" + host + ":" + std::to_string(test_server().tls_port()) +
         "?ca=" + c.path("ca.pem") + "&cert=" + c.path("client.pem") +
         "&key=" + c.path("client.key") + query;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SERVER_BATON_TEST_SERVER_H_
