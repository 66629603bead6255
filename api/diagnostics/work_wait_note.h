// A backend's own words on why one of its ops still waits, for the stall watch's "has
// waited" lines.
//
// The watch knows where the other ranks are, not what this rank's backend keeps: shm names
// the messages its rank holds that no receive took only in a receive's final Timeout, while
// the lines a user staring at a hung job sees first, one report interval into the wait
// (DISTCOMM_STALL_REPORT_SECONDS), said nothing of them. A backend attaches a note to a
// pending Work; the watch appends it to that op's lines ("...: rank 2 has no transfer with
// this rank pending; this rank holds 1 message no receive has taken: from rank 1 (tag 0, 8
// bytes)"). The core keeps it beside the Work (work_marks.h: a Work's layout is the ABI)
// until the op ends or the Work is destroyed.
#pragma once

#include <string>

#include "api/work.h"

// Sets `note` (copied; null or "" clears it) as what the backend says of `work`'s wait,
// until the op ends (ABI minor 11). A core entry point declared weak, so that a plugin that
// calls it still loads in an older core (whose watch then says what it did before).
extern "C" void distcomm_work_wait_note(distcomm::Work* work, const char* note) __attribute__((weak));

namespace distcomm {

// For backends: what distcomm_work_wait_note does, where the core has it. Cheap enough for
// a few calls a second, not for every poll: the core copies the text under a lock.
inline void note_wait(Work& work, const std::string& note) {
  if (distcomm_work_wait_note) distcomm_work_wait_note(&work, note.c_str());
}

}  // namespace distcomm
