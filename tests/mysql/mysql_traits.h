// tests/mysql/mysql_traits.h — what the conformance suite is told about
// mysql:// (StoreTraits), shared by the plain and the TLS instantiations.
#ifndef BATON_TESTS_MYSQL_MYSQL_TRAITS_H_
#define BATON_TESTS_MYSQL_MYSQL_TRAITS_H_

#include "conformance.h"

namespace baton::testing {

inline baton::conformance::StoreTraits mysql_traits() {
  baton::conformance::StoreTraits t;
  t.unsupported["watch"] =
      "MySQL/MariaDB has no change feed a client can subscribe to (the binary "
      "log is for replicas): baton status --serve polls";
  return t;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_MYSQL_MYSQL_TRAITS_H_
