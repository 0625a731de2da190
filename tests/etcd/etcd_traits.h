// tests/etcd/etcd_traits.h — what the conformance suite is told about
// etcd:// (StoreTraits), shared by the 1-member and 3-member instantiations.
#ifndef BATON_TESTS_ETCD_ETCD_TRAITS_H_
#define BATON_TESTS_ETCD_ETCD_TRAITS_H_

#include "conformance.h"

namespace baton::testing {

// Rule 4's test extends a 5 s lease to 300 ms and expects describe to show
// at most 300 ms left. etcd leases are whole seconds (at least 1 s), so the
// key lives on for up to a second: the holder's own deadline follows the
// 300 ms, the store's does not. Extend-to with whole seconds is tested in
// etcd_store_test (EtcdStore.ExtendToWholeSecondsSetsTheLeaseFromNow).
inline baton::conformance::StoreTraits etcd_traits() {
  baton::conformance::StoreTraits t;
  t.unsupported["rule4"] =
      "etcd leases are whole seconds (at least 1 s): a sub-second extend "
      "keeps the key up to 1 s; the holder's deadline follows the TTL asked "
      "for (extend-to with whole seconds: etcd_store_test)";
  t.unsupported["subsecond_ttl"] =
      "etcd leases are whole seconds (at least 1 s): a 200 ms lease's key "
      "lives up to 1 s, and a release or extend within that second finds it "
      "held";
  return t;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_ETCD_ETCD_TRAITS_H_
