// The launcher's last line when its ranks exited 0. A failed job's launcher ends with the
// failure (attempt.h, job.h, elastic_agent.h). A launcher says "the job succeeded" only when
// it knows: a single machine's, an elastic round's, and node 0's of a static job across
// machines once every other machine's launcher said in its roll call (node_roll_call.h) that
// its ranks exited 0. Another machine's launcher of a static job says only what is true of
// its own machine (node 0's ranks may still fail), and node 0's names the machines whose
// ranks failed, still ran when it stopped waiting, or were lost:
//
//   launch: the job succeeded: ranks 0-1 of 4 on this machine (node 0 of 2) exited 0 after 12.3 s
//   launch: ranks 2-3 of 4 on this machine (node 1 of 2) exited 0 after 12.1 s
//   launch: ranks 0-1 of 4 on this machine (node 0 of 2) exited 0 after 4.2 s; node 1's ranks
//     failed (ranks 2-3 on host-b, launcher pid 7)
//   launch: the job succeeded: ranks 0-1 of 4 on this machine (node 0 of 2) exited 0 after 9.8 s;
//     it went on after node 1 (ranks 2-3 on host-b, launcher pid 7) was lost, last seen 4.1 s into the job
//
// (one line each; wrapped here). The last: a fault-tolerant job (--on_failure=continue).
#pragma once

#include <chrono>
#include <string>

#include "launch/attempt.h"

namespace distcomm {
namespace launch {

// The last line above, for a result with exit code 0 whose ranks here ran (local_ranks >
// 0); "" otherwise (a failure, or an elastic job that finished before this machine joined,
// which its launcher says already). `elapsed`: since the launcher began.
std::string clean_exit_line(const JobResult& result, std::chrono::steady_clock::duration elapsed);

// "rank 2", "ranks 2-3": `count` ranks from `first`.
std::string rank_span_text(int first, int count);

}  // namespace launch
}  // namespace distcomm
