// What the core keeps about a backend's Work beside it, for its own stall watch: a Work's
// layout is the plugins' ABI (plugin.h), and so is OpFingerprint's (plugins build
// fingerprints and hand vectors of them to the core), so neither can grow a field for this.
// Each mark is keyed by the Work's address (work_side_table.h) and erased when the Work
// ends (Work::on_finish) and when it is destroyed, before its address can be reused.
//
// Core only (not in PUBLIC_HEADERS): these are plain core symbols, which a plugin calling them
// would need from every core it loads in. A backend marks a draining recv through
// refused_transfers.h's weak entry point instead, and notes its wait through
// work_wait_note.h's.
#pragma once

#include <cstdint>
#include <string>

#include "api/work.h"

namespace distcomm {

// Whether `work` was marked by distcomm_refusal_draining (refused_transfers.h) and has not
// ended: a recv draining the message it refused. Cheap when nothing is marked (one atomic
// load).
bool refusal_draining(const Work* work);

// Records `epoch` (OpNumbering::next_ordinal's, non-zero: 0 is what an unmarked Work reads)
// as the ordinal epoch of the point-to-point op `work`, until the op ends. The ProcessGroup
// calls it once the backend has returned the op's Work; the stall watch reads it later
// (ordinal_epoch_of) for its reports, after probe_after, long after the op was issued.
void note_ordinal_epoch(Work& work, uint64_t epoch);

// The epoch noted for `work`, 0 where none (no tag of the pair dropped yet: the common
// case). Cheap when nothing is noted (one atomic load).
uint64_t ordinal_epoch_of(const Work* work);

// What the backend said of `work`'s wait (work_wait_note.h's distcomm_work_wait_note), ""
// where nothing, or the op has ended. Cheap when no Work has a note (one atomic load).
std::string wait_note_of(const Work* work);

// Forgets `work`'s wait note (forget_work_marks calls it; work_wait_note.cc keeps the notes).
void forget_wait_note(const Work* work);

// Forgets every mark of `work` (Work::~Work: a Work freed without ending left its marks to
// a later Work at the same address). Cheap when nothing is marked.
void forget_work_marks(const Work* work);

}  // namespace distcomm
