// tests/support/etcd_member.h — the command line of one member of a
// private etcd 3.4 cluster (Debian's etcd-server) on loopback, shared by
// the etcd tests' launcher and the torture harness: 20 ms heartbeat and
// 200 ms election timeout, so a leader change takes well under a second.
#ifndef BATON_TESTS_SUPPORT_ETCD_MEMBER_H_
#define BATON_TESTS_SUPPORT_ETCD_MEMBER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace baton::testing {

struct EtcdMemberSpec {
  std::string name;  // unique in the cluster ("m0")
  std::uint16_t client_port = 0;
  std::uint16_t peer_port = 0;
};

// `binary`: /usr/bin/etcd; `data_dir`: the member's own; `state`: "new" or
// "existing"; `token`: the cluster's initial token.
inline std::vector<std::string> etcd_member_args(
    const std::string& binary, const std::vector<EtcdMemberSpec>& members,
    std::size_t i, const std::string& data_dir, const std::string& state,
    const std::string& token) {
  std::string cluster;
  for (const auto& o : members) {
    if (!cluster.empty()) cluster += ",";
    cluster += o.name + "=http://127.0.0.1:" + std::to_string(o.peer_port);
  }
  const EtcdMemberSpec& m = members[i];
  const std::string client =
      "http://127.0.0.1:" + std::to_string(m.client_port);
  const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
  return {binary,   "--name",
          m.name,   "--data-dir",
          data_dir, "--listen-client-urls",
          client,   "--advertise-client-urls",
          client,   "--listen-peer-urls",
          peer,     "--initial-advertise-peer-urls",
          peer,     "--initial-cluster",
          cluster,  "--initial-cluster-state",
          state,    "--initial-cluster-token",
          token,    "--heartbeat-interval",
          "20",     "--election-timeout",
          "200",    "--logger",
          "zap",    "--log-level",
          "warn"};
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_ETCD_MEMBER_H_
