// stores/registry.h — what the registry (registry.cc) knows beyond the
// public baton/store_descriptor.h.
//
// The stores built into this binary are listed once, in registry.cc, each
// guarded by its BATON_WITH_<STORE> build option (not self-registered from
// static initializers, which the linker drops from static libraries).
// baton::open_store() (baton/store_descriptor.h) finds a URL's descriptor —
// a registered one first, then a built-in one — parses the URL against its
// options and calls its open function.
//
// Thread safety: every function may be called from any thread.
#ifndef BATON_STORES_REGISTRY_H_
#define BATON_STORES_REGISTRY_H_

#include <string>
#include <vector>

namespace baton::store {

// The schemes of the stores built in, as a URL begins ("memory:",
// "baton://", ...), in the order of the project's documentation, then any
// registered ones.
std::vector<std::string> builtin_schemes();

}  // namespace baton::store

#endif  // BATON_STORES_REGISTRY_H_
