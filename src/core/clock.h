// core/clock.h — core's names for time on the one clock, baton::Clock
// (include/baton/clock.h).
//
// Core never reads the time itself: a LockTable is given a baton::Clock
// (the steady clock in batond and the memory: store, a ManualClock in
// tests) and reads only its now(). An Instant is one reading of it.
//
// Thread safety: types only.
#ifndef BATON_CORE_CLOCK_H_
#define BATON_CORE_CLOCK_H_

#include <chrono>
#include <type_traits>

#include "baton/clock.h"

namespace baton::core {

using Nanos = std::chrono::nanoseconds;
// An instant on the table's baton::Clock.
using Instant = baton::Clock::time_point;

static_assert(std::is_same_v<Instant::duration, Nanos>,
              "core counts time in nanoseconds of baton::Clock");

}  // namespace baton::core

#endif  // BATON_CORE_CLOCK_H_
