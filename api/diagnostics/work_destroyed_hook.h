// The hook ~Work calls (api/work.cc defines it) so that what the core keeps beside a Work
// (work_marks.h's marks, work_wait_note.h's notes) is forgotten with it: a Work freed
// without ending must not leave its entries to a later Work at its address. A pointer, set
// by the first mark or note, not a call: the vocabulary does not include the diagnostics
// above it (tests/api/package_layers_test.sh, rule 1), so work.cc cannot include this
// header either; its definition must stay of this type.
//
// Core only (not in PUBLIC_HEADERS).
#pragma once

#include <atomic>

namespace distcomm {

class Work;

namespace internal {

extern std::atomic<void (*)(const Work*)> work_destroyed_hook;

}  // namespace internal
}  // namespace distcomm
