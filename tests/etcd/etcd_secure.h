// tests/etcd/etcd_secure.h — one private etcd member with TLS on its client
// port (client certificates required), etcd authentication enabled and the
// users of the secure tests, started once per test binary. Certificates are
// made at test time (tests/server/test_certs.h: ca.pem signed server.pem
// for 127.0.0.1/localhost and client.pem, CN client1).
//
// Users (docs/stores/etcd.md, "Security"): root; `baton` with the role
// `baton` (readwrite on the prefix "<prefix>/"); `norole` with no role;
// `client1` (the client certificate's CN) with the role `baton`. The
// passwords are fixed and distinctive so that ctest's
// FAIL_REGULAR_EXPRESSION fails a test whose output shows one
// (tests/etcd/CMakeLists.txt); they are given to the store in password
// files (mode 0600), never printed.
#ifndef BATON_TESTS_ETCD_ETCD_SECURE_H_
#define BATON_TESTS_ETCD_ETCD_SECURE_H_

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "etcd_process.h"
#include "test_certs.h"

namespace baton::testing {

inline constexpr const char* kRootPassword = "baton-etcd-root-3Kv";
inline constexpr const char* kBatonPassword = "baton-etcd-secret-7Qx";
inline constexpr const char* kNorolePassword = "baton-etcd-norole-9Zp";
inline constexpr const char* kWrongPassword = "baton-etcd-wrong-5Tm";

class SecureEtcd {
 public:
  // `prefix`: the role's key prefix (without "/"); `token_ttl_s`: the
  // server's --auth-token-ttl (0: etcd's 300 s).
  explicit SecureEtcd(const std::string& prefix, int token_ttl_s = 0)
      : prefix_(prefix) {
    EtcdClusterTls tls;
    tls.server.cert = certs_.path("server.pem");
    tls.server.key = certs_.path("server.key");
    tls.server.ca = certs_.path("ca.pem");
    tls.server.second_address = true;
    tls.server.auth_token_ttl_s = token_ttl_s;
    tls.client_cert = certs_.path("client.pem");
    tls.client_key = certs_.path("client.key");
    cluster_ = std::make_unique<EtcdCluster>(1, tls);
    admin({"user", "add", "root", "--interactive=false"}, kRootPassword);
    admin({"user", "grant-role", "root", "root"});
    add_role("baton", "readwrite");
    add_user("baton", kBatonPassword, "baton");
    add_user("norole", kNorolePassword, "");
    add_user("client1", "baton-etcd-cn-user-unused", "baton");
    admin({"auth", "enable"});
    cluster_->set_root_password(kRootPassword);
  }

  EtcdCluster& cluster() { return *cluster_; }
  const TestCertificates& certs() const { return certs_; }
  const std::string& prefix() const { return prefix_; }
  std::uint16_t port() const { return cluster_->client_port(0); }
  std::string hostport() const { return "127.0.0.1:" + std::to_string(port()); }

  // A file holding `password` (mode 0600), made once per password.
  std::string password_file(const std::string& password) {
    const std::string path =
        certs_.path("pw-" + std::to_string(std::hash<std::string>()(password)));
    std::ofstream(path) << password << "\n";
    ::chmod(path.c_str(), 0600);
    return path;
  }
  // etcds://USER@127.0.0.1:P/<prefix>?ca&cert&key&password_file=... (the
  // password in a file: the URL holds no secret).
  std::string url_as(const std::string& user, const std::string& password,
                     const std::string& extra = "") {
    return "etcds://" + user + "@" + hostport() + "/" + prefix_ +
           cluster_->tls_query("?") +
           "&password_file=" + password_file(password) + extra;
  }
  std::string url() { return url_as("baton", kBatonPassword); }

  // etcdctl as root (after setup); throws if it fails.
  std::string admin(const std::vector<std::string>& args,
                    const std::string& input = "") {
    std::string out;
    const int st =
        cluster_->etcdctl(args, input.empty() ? "" : input + "\n", &out);
    if (st != 0) {
      throw std::runtime_error(
          "etcdctl " + args[0] + " " + (args.size() > 1 ? args[1] : "") +
          " failed (status " + std::to_string(st) + "): " + out);
    }
    return out;
  }
  void add_role(const std::string& role, const std::string& perm) {
    admin({"role", "add", role});
    admin({"role", "grant-permission", role, "--prefix=true", perm,
           prefix_ + "/"});
  }
  void add_user(const std::string& user, const std::string& password,
                const std::string& role) {
    admin({"user", "add", user, "--interactive=false"}, password);
    if (!role.empty()) admin({"user", "grant-role", user, role});
  }
  // Keys under "<prefix>/" (as root), one per line.
  std::string keys() {
    return admin({"get", "--prefix", "--keys-only", prefix_ + "/"});
  }

 private:
  TestCertificates certs_;
  std::string prefix_;
  std::unique_ptr<EtcdCluster> cluster_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_ETCD_ETCD_SECURE_H_
