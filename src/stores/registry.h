// stores/registry.h — creates a Store from a URL.
//
// Known schemes: memory: (in-process), baton:// (batond), postgres://,
// redis://, redlock://, mysql://, sqlite:, zk://, etcd://. A scheme whose
// store is not built into this binary gives invalid_argument naming the
// CMake option that enables it; an unknown scheme or malformed URL gives
// invalid_argument naming the problem.
//
// Built-in stores are listed explicitly in registry.cc (guarded by their
// BATON_WITH_<STORE> build option), not self-registered from static
// initializers, which the linker drops from static libraries.
//
// Thread safety: open_store() and register_store() may be called from any
// thread.
#ifndef BATON_STORES_REGISTRY_H_
#define BATON_STORES_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "core/url.h"
#include "stores/store.h"

namespace baton::store {

using core::Url;
using Factory = std::function<Result<std::unique_ptr<Store>>(const Url&)>;

// Registers an extra factory for `scheme` (no "://"), e.g. a fault-injecting
// wrapper in tests. A later registration replaces an earlier one and wins
// over a built-in store.
bool register_store(std::string scheme, Factory factory);

Result<std::unique_ptr<Store>> open_store(std::string_view url);

// The schemes of the stores built in, as a URL begins ("memory:",
// "baton://", ...), in the order of the project's documentation.
std::vector<std::string> builtin_schemes();

}  // namespace baton::store

#endif  // BATON_STORES_REGISTRY_H_
