// tests/conformance/memory_conformance_test.cc — the suite on `memory:`.
// Every client of one test run shares the named store "memory:conformance".
#include "conformance.h"

INSTANTIATE_CONFORMANCE(Memory,
                        baton::conformance::url_factory("memory:conformance"));
INSTANTIATE_ENDED_LEASE_SUITE(
    Memory, baton::conformance::url_factory("memory:conformance"));
