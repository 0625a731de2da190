// core/version.cc — baton::version() (baton/version.h). BATON_VERSION_STRING
// is CMake's project VERSION (src/core/CMakeLists.txt).
#include "baton/version.h"

namespace baton {

std::string_view version() noexcept { return BATON_VERSION_STRING; }

}  // namespace baton
