// baton/version.h — which baton this is: the release version and the store
// URL schemes built into the library.
//
//   std::cout << "baton " << baton::version() << '\n';   // "0.1.0"
//   for (const auto& s : baton::store_schemes()) std::cout << s << ' ';
//
// (The git commit a build came from is embedded in the `baton` and
// `batond` programs, not in the library: `baton --version`.)
//
// Thread safety: pure functions.
#ifndef BATON_VERSION_H_
#define BATON_VERSION_H_

#include <string>
#include <string_view>
#include <vector>

namespace baton {

// The release version, "MAJOR.MINOR.PATCH" (CMake's project VERSION).
std::string_view version() noexcept;

// The store URL schemes this library opens, as a URL begins:
// "memory:", "baton://", "batons://", "postgres://", ... Which ones are
// built in is decided by the build options BATON_WITH_<STORE>.
std::vector<std::string> store_schemes();

}  // namespace baton

#endif  // BATON_VERSION_H_
