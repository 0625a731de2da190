// stores/zookeeper/zk_handle.h — the C client's handle behind a Conn, for
// the Conn's source files (zk_conn.cc, zk_conn_async.cc). Internal.
#ifndef BATON_STORES_ZOOKEEPER_ZK_HANDLE_H_
#define BATON_STORES_ZOOKEEPER_ZK_HANDLE_H_

#include <zookeeper/zookeeper.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "stores/zookeeper/zk_conn.h"

namespace baton::store::zk {

struct Conn::Handle {
  Conn* conn = nullptr;
  zhandle_t* zh = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  int state = 0;  // last session state seen (guarded by mu)
  // ZooKeeper's answer to the digest credentials (guarded by mu).
  bool auth_done = false;
  int auth_rc = 0;
  ~Handle() {
    if (zh != nullptr) zookeeper_close(zh);
  }
};

// Options::acl as the C client takes it: the strings stay here, the
// ACL_vector points into them.
struct Conn::CAcl {
  std::vector<std::string> schemes, ids;
  std::vector<struct ACL> entries;
  struct ACL_vector vec {};
  explicit CAcl(const std::vector<AclEntry>& acl) {
    schemes.reserve(acl.size());
    ids.reserve(acl.size());
    for (const auto& e : acl) {
      schemes.push_back(e.scheme);
      ids.push_back(e.id);
    }
    for (std::size_t i = 0; i < acl.size(); ++i) {
      entries.push_back(
          ACL{acl[i].perms, Id{schemes[i].data(), ids[i].data()}});
    }
    vec.count = static_cast<std::int32_t>(entries.size());
    vec.data = entries.data();
  }
};

// The C client's stat as ours (nothing if either is null).
void copy_stat(const struct ::Stat* s, Stat* out);

}  // namespace baton::store::zk

#endif  // BATON_STORES_ZOOKEEPER_ZK_HANDLE_H_
