// client/version.cc — baton::store_schemes() (baton/version.h): the stores
// the registry was built with.
#include "baton/version.h"

#include "stores/registry.h"

namespace baton {

std::vector<std::string> store_schemes() { return store::builtin_schemes(); }

}  // namespace baton
