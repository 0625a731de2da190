// tests/support/stores/netns.h — members of a replicated store, each in a
// network namespace of its own, so that the links *between* members can be
// cut while clients still reach every member (Jepsen's partitions).
//
// Layout: namespace i has one veth into a bridge in the test's own
// namespace and the address 10.A.B.(i+1)/24 (A.B from the pid and the
// instance, so no two networks share a subnet); the bridge has .254, so the
// test's clients and proxies reach each member at host(i). Member i runs under
// `ip netns exec` (exec_prefix), and a cut between i and j is an nftables
// rule in each of the two namespaces that drops every packet to and from
// the other (silently: a connect or a write waits, as behind a dead link).
// Nothing outside the namespaces and the bridge is touched. Needs root,
// /usr/sbin/ip and /usr/sbin/nft (Debian nftables); create() says which is
// missing otherwise. Namespaces left by a test binary that died are
// removed by the next create().
#ifndef BATON_TESTS_SUPPORT_STORES_NETNS_H_
#define BATON_TESTS_SUPPORT_STORES_NETNS_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace baton::testing {

class MemberNetwork {
 public:
  // `n` namespaces (1..8) and the bridge; nullptr and *why if they cannot
  // be made.
  static std::unique_ptr<MemberNetwork> create(int n, std::string* why);
  ~MemberNetwork();
  MemberNetwork(const MemberNetwork&) = delete;
  MemberNetwork& operator=(const MemberNetwork&) = delete;

  int size() const { return static_cast<int>(hosts_.size()); }
  // Member i's address ("10.A.B.(i+1)").
  const std::string& host(int i) const {
    return hosts_[static_cast<std::size_t>(i)];
  }
  // The command prefix that runs a program in namespace i.
  std::vector<std::string> exec_prefix(int i) const;
  // Drops (on) or lets through (off) every packet between members i and j.
  bool cut(int i, int j, bool on, std::string* why);
  // Every link whole again.
  void heal_all();
  // The cuts now in force, as "0-1,0-2" ("" when none).
  std::string cuts() const;

 private:
  MemberNetwork() = default;
  bool apply(int i, std::string* why);  // namespace i's rules from cut_

  std::string tag_;  // "bt<pid>_<instance>" (base 36): every name starts so
  std::vector<std::string> hosts_;  // member addresses
  std::vector<std::string> names_;  // namespace names
  std::vector<std::set<int>> cut_;  // i -> members it cannot reach
  bool bridge_ = false;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_STORES_NETNS_H_
