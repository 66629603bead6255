// The launcher's last line when the job succeeded. A failed job's launcher ends with the
// failure (attempt.h, job.h, elastic_agent.h); a successful one ended silently, and so did
// node 0's when the job went on without a machine that was lost: only the ranks' own lines
// (an ft generation "without rank2 rank3") told it. Now every launcher of a successful job
// ends with one line saying what is true of this machine and what the job went on after:
//
//   launch: the job succeeded: ranks 0-1 of 4 on this machine (node 0 of 2) exited 0 after 12.3 s
//   launch: the job succeeded: ranks 0-1 of 4 on this machine (node 0 of 2) exited 0 after 9.8 s;
//     it went on after node 1 (ranks 2-3 on host-b, launcher pid 7) was lost, last seen 4.1 s into the job
//
// (one line; wrapped here).
#pragma once

#include <chrono>
#include <string>

#include "launch/attempt.h"

namespace distcomm {
namespace launch {

// "the job succeeded: ...", for a result with exit code 0 whose ranks here ran
// (local_ranks > 0); "" otherwise (a failure, or an elastic job that finished before this
// machine joined, which its launcher says already). `elapsed`: since the launcher began.
std::string success_line(const JobResult& result, std::chrono::steady_clock::duration elapsed);

// "rank 2", "ranks 2-3": `count` ranks from `first`.
std::string rank_span_text(int first, int count);

}  // namespace launch
}  // namespace distcomm
