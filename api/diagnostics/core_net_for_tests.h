// For tests only: the floor of the core's grace past an op's timeout (core_timeout_grace,
// api/work.h: max(floor, 10% of the timeout), floor 10 s). A test of the core's safety net
// across a process stop must stop the process past the op's timeout and the grace; at the
// real floor each such test would stop for over 12 s. Not public: a program has no reason
// to shorten the margin the built-in backends need to end their ops first.
#pragma once

#include <chrono>

namespace distcomm {
namespace internal {

// Sets the floor for the whole process (every Work's net, also ones already armed) and
// returns the previous one. Defined in api/work.cc.
std::chrono::milliseconds set_core_grace_floor_for_tests(std::chrono::milliseconds floor);

}  // namespace internal
}  // namespace distcomm
