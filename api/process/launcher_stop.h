// A launcher's mark, in the job's store, on a rank it stops because another rank failed
// (tools/launch stops a failed rank's machine-mates with SIGTERM). Such a rank's
// connections close like a dead rank's; a peer on another machine that sees a whole
// machine's ranks go together would otherwise name them all as having died, when one of
// them failed and its launcher stopped the rest. The launcher writes the mark before its
// SIGTERM (launch/job_failure_board.h); the core reads it where it explains lost peers
// (GroupFailure::stopped_by_launcher) and names those ranks apart, as stopped.
//
// Header-only: the launcher, which does not link the core, writes what the core reads.
#pragma once

#include <string>

namespace distcomm {

// The key (in the job's store, outside any group's prefix) of world rank `world_rank`'s mark.
// Its value says why ("rank 9 failed"), as the launcher words it.
inline std::string launcher_stop_key(int world_rank) { return "launch/stopped/" + std::to_string(world_rank); }

}  // namespace distcomm
