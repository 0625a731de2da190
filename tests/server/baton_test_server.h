// tests/server/baton_test_server.h — the one batond of the conformance_baton
// binary: a plain listener and a TLS listener (client certificates signed by
// the test CA required), with two users (config written at test time, the
// hashes made by `batond --hash-password`):
//   admin  every permission on every name (the conformance suite's user)
//   jobs   read, lock and counter on names under "jobs/" only; also the
//          user of a TLS client presenting client.pem (CN client1)
// Started on first use, stopped at exit.
#ifndef BATON_TESTS_SERVER_BATON_TEST_SERVER_H_
#define BATON_TESTS_SERVER_BATON_TEST_SERVER_H_

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "batond_process.h"
#include "test_certs.h"

namespace baton::testing {

inline constexpr const char* kAdminPassword = "admin-test-pw";
inline constexpr const char* kJobsPassword = "jobs-test-pw";

inline TestCertificates& test_certs() {
  static auto* c = new TestCertificates();
  return *c;
}

// `batond --hash-password` of `password` (throws if it printed no hash).
inline std::string hash_with_batond(const std::string& password) {
  std::string h = run("printf '%s\\n' '" + password +
                      "' | " BATOND_PATH " --hash-password");
  while (!h.empty() && h.back() == '\n') h.pop_back();
  if (h.rfind("pbkdf2-sha256$", 0) != 0) {
    throw std::runtime_error("batond --hash-password printed: " + h);
  }
  return h;
}

inline BatondProcess& test_server() {
  static BatondProcess* p = [] {
    TestCertificates& c = test_certs();
    const std::string config = c.path("batond.yaml");
    {
      std::ofstream f(config);
      f << "users:\n"
        << "  admin:\n"
        << "    password_hash: \"" << hash_with_batond(kAdminPassword) << "\"\n"
        << "    rules: { \"\": [read, lock, counter, admin] }\n"
        << "  jobs:\n"
        << "    password_hash: \"" << hash_with_batond(kJobsPassword) << "\"\n"
        << "    client_cert_cn: client1\n"
        << "    rules: { \"jobs/\": [read, lock, counter] }\n";
    }
    auto* s = new BatondProcess(
        "",
        {"--config", config, "--tls-listen", "127.0.0.1:0", "--tls-cert-file",
         c.path("server.pem"), "--tls-key-file", c.path("server.key"),
         "--tls-ca-file", c.path("ca.pem"), "--metrics-listen", "127.0.0.1:0"},
        /*keep_output=*/true);
    std::atexit([] {
      delete p;
      delete &test_certs();
    });
    return s;
  }();
  return *p;
}

// baton://user:password@127.0.0.1:<plain port>
inline std::string baton_url(const std::string& user = "admin",
                             const std::string& password = kAdminPassword) {
  return "baton://" + user + ":" + password +
         "@127.0.0.1:" + std::to_string(test_server().port());
}

// batons:// to the TLS listener as admin, with the test CA and client
// certificate; `query` (e.g. "&timeout_ms=1000") is appended.
inline std::string batons_url(const std::string& host = "127.0.0.1",
                              const std::string& query = "") {
  TestCertificates& c = test_certs();
  return "batons://admin:" + std::string(kAdminPassword) + "@" + host + ":" +
         std::to_string(test_server().tls_port()) + "?ca=" + c.path("ca.pem") +
         "&cert=" + c.path("client.pem") + "&key=" + c.path("client.key") +
         query;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SERVER_BATON_TEST_SERVER_H_
