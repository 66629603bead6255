// How a rank words another rank's failure that it adopts (GroupFailure, group_failure.h):
// the op cut off here ends with an error of the cause's kind that names the cause's rank
// and quotes its message. Kept apart from group_failure.cc, which holds the recording and
// the board; this is only words. The core's own (not a public header).
#pragma once

#include <cstddef>
#include <exception>
#include <string>

#include "api/diagnostics/group_failure.h"

namespace distcomm {
namespace internal {

// What an op cut off by `cause` (another rank's failure) ends with. world: " (world rank
// N)" for the cause's rank in a subgroup, else "". Without an op in flight here (a rank
// idle when the failure came) no op was cut off: the words say what it did instead.
// group_size: the group's ranks (0 when not known): a Desync's table is quoted folded in a
// large group (quoted_desync), since the rank that found it shows it whole.
std::exception_ptr explained_by(const FailureRecord& cause, const std::string& world, bool op_in_flight,
                                size_t group_size);

// Another rank's record says what this rank saw itself: the same peer's connection closed.
// Then this rank's own words are as true and name its own op, and the cause is the same.
bool same_loss(const FailureRecord& other, FailureRecord::Kind kind, int culprit);

// Whether `message` (an error before this rank's own op description goes in front) quotes
// another rank's failure that itself quotes a further rank's: two or more ranks' op
// descriptions ("rank 7/64 ...") in it. A backend that passes failures from rank to rank
// (shm: "rank 24 failed: rank 24/64 ...: rank 23 failed: rank 23/64 ...") grows such a
// quote by one rank per hop along a ring, until it is cut and the cause falls off its end:
// the rank adopts the root (the board's first record) instead.
bool quotes_a_quote(const std::string& message);

// The group's size as an op's description says it ("rank 3/16 group ..." -> 16), 0 when it
// does not.
size_t group_size_in(const std::string& description);

}  // namespace internal
}  // namespace distcomm
