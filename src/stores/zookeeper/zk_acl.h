// stores/zookeeper/zk_acl.h — the ACL every node of a zookeeper:// store
// carries, and ZooKeeper's digest identities (docs/stores/zookeeper.md,
// "Security").
//
// With credentials (user + password) every node the store makes gets
// exactly: digest:<user>:<base64(sha1("<user>:<password>"))> with every
// permission, plus each admin id (digest:<user>:<hash>) with every
// permission; nobody else gets anything, not even READ (request nodes'
// names and data carry owner tokens). Without credentials every node is
// open (world:anyone, every permission), as before credentials existed.
//
// Thread safety: pure functions.
#ifndef BATON_STORES_ZOOKEEPER_ZK_ACL_H_
#define BATON_STORES_ZOOKEEPER_ZK_ACL_H_

#include <string>
#include <string_view>
#include <vector>

namespace baton::store::zk {

// ZooKeeper's permission bits (ZOO_PERM_*).
inline constexpr int kPermRead = 1;
inline constexpr int kPermWrite = 2;
inline constexpr int kPermCreate = 4;
inline constexpr int kPermDelete = 8;
inline constexpr int kPermAdmin = 16;
inline constexpr int kPermAll = 31;

struct AclEntry {
  std::string scheme;  // "digest", "world", ...
  std::string id;      // "alice:<hash>", "anyone"
  int perms = 0;
  bool operator==(const AclEntry&) const = default;
};

// base64(sha1(text)), as ZooKeeper's DigestAuthenticationProvider with its
// default algorithm (SHA1) computes it.
std::string sha1_base64(std::string_view text);
// "user:base64(sha1(user:password))": the id ZooKeeper gives a session
// that authenticated with scheme "digest" and "user:password".
std::string digest_id(std::string_view user, std::string_view password);
// Whether `id` looks like a digest id: a user without ':' and 28 base64
// characters ending in '=' (a SHA1 digest).
bool valid_digest_id(std::string_view id);

// The ACL the store creates every node with: see the file comment. An
// empty `user` means no credentials (the open ACL).
std::vector<AclEntry> store_acl(std::string_view user,
                                std::string_view password,
                                const std::vector<std::string>& admin_ids);

// Whether two ACLs grant the same (order does not matter).
bool same_acl(std::vector<AclEntry> a, std::vector<AclEntry> b);

// "digest:alice:<hash>:cdrwa, world:anyone:r" (zkCli's spelling), with
// `own_id` (the store's own digest id, derived from its password) written
// as "<user>:<hash of the given password>" so that no message carries it.
std::string format_acl(const std::vector<AclEntry>& acl,
                       std::string_view own_id = {});

}  // namespace baton::store::zk

#endif  // BATON_STORES_ZOOKEEPER_ZK_ACL_H_
