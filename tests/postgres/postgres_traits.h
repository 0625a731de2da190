// tests/postgres/postgres_traits.h — what the conformance suite is told about
// postgres:// (StoreTraits), shared by the plain and the TLS instantiations.
#ifndef BATON_TESTS_POSTGRES_POSTGRES_TRAITS_H_
#define BATON_TESTS_POSTGRES_POSTGRES_TRAITS_H_

#include "conformance.h"

namespace baton::testing {

inline baton::conformance::StoreTraits postgres_traits() {
  baton::conformance::StoreTraits t;
  t.unsupported["watch"] =
      "PostgreSQL has no change feed over a table without a NOTIFY in every "
      "lock call, which would tax every caller for the sake of a watcher: "
      "baton status --serve polls";
  return t;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_POSTGRES_POSTGRES_TRAITS_H_
