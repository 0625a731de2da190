// tests/conformance/conformance.h — the conformance kit, for the
// instantiation files of baton's own stores (the kit itself is public:
// include/baton/conformance.h, src/conformance/).
#ifndef BATON_TESTS_CONFORMANCE_CONFORMANCE_H_
#define BATON_TESTS_CONFORMANCE_CONFORMANCE_H_

#include "baton/conformance.h"

#endif  // BATON_TESTS_CONFORMANCE_CONFORMANCE_H_
