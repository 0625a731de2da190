// core/duration.h — human durations (the public baton/duration.h, under
// the names core code has always used).
//
// Thread safety: pure functions.
#ifndef BATON_CORE_DURATION_H_
#define BATON_CORE_DURATION_H_

#include "baton/duration.h"

namespace baton::core {

using baton::format_duration;
using baton::parse_duration;

}  // namespace baton::core

#endif  // BATON_CORE_DURATION_H_
