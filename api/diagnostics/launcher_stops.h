// How every backend names the lost peers that their launcher stopped because another rank
// failed (launcher_stops(), group_failure.h: tools/launch stops a failed rank's
// machine-mates with SIGTERM after marking them in the job's store). Their processes end
// like a dead rank's; a survivor on another machine (or in another launcher's share of
// this one) named them as having died, as culprits, when one rank failed and its launcher
// stopped the rest. One wording for every backend, so that a reader (and tools/trace)
// meets the same sentence whichever backend saw the loss.
//
// Header-only, over the core's ranks_text and the weak entry behind launcher_stops(): no new
// core entry point. ranks_text is a C++ function of the core (3df2725), which gloo's words
// used already: a plugin built with this header needs a core that has it (every core of ABI
// minor 11, and minor-9 and -10 cores built after it); against one without the weak entry
// nothing is found stopped.
#pragma once

#include <string>
#include <vector>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {

// "ranks [8, 10, 11] were stopped by their launcher after rank 9 failed (signal SIGKILL
// (Killed)), not failing themselves"; "rank 8 was stopped by its launcher after ...".
// The ranks are the group's (as split.stopped gives them), the launcher's why names the
// job's (world) rank that failed.
inline std::string launcher_stopped_text(const LauncherStops& split) {
  const bool one = split.stopped.size() == 1;
  return ranks_text(split.stopped) + (one ? " was" : " were") + " stopped by " + (one ? "its" : "their") +
         " launcher after " + split.why + ", not failing " + (one ? "itself" : "themselves");
}

// What a backend says of lost peers some of which their launcher stopped: its own words for
// the others (`others_lost`, "" when every lost peer was stopped), then the stopped ones
// apart: "rank 9 closed its connection (the process died or exited); ranks [8, 10, 11] were
// stopped by their launcher after rank 9 failed (...), not failing themselves".
inline std::string with_launcher_stopped_text(const std::string& others_lost, const LauncherStops& split) {
  const std::string stopped = launcher_stopped_text(split);
  return others_lost.empty() ? stopped : others_lost + "; " + stopped;
}

}  // namespace distcomm
