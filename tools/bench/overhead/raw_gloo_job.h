// One rank of a standalone gloo job: the gloo calls that distcomm's gloo plugin maps each op
// to, called directly on a context of the job's own, with nothing of distcomm in the process:
//   all_reduce      gloo::allreduce (ring or bcube), gloo::sum<float>
//   broadcast       gloo::broadcast from rank 0
//   all_gather      gloo::allgather (separate input and output)
//   reduce_scatter  gloo::ReduceScatterHalvingDoubling (gloo has no option-style
//                   reduce_scatter; the plugin runs its own ring on gloo's unbound buffers)
#pragma once

#include <string>
#include <vector>

#include "tools/bench/overhead/job_spec.h"
#include "tools/bench/overhead/timed_loop.h"

namespace distcomm {
namespace bench {

// Connects to the other ranks through a gloo FileStore in store_dir (TCP on 127.0.0.1),
// runs every size of the spec and returns the results on rank 0 (nothing on the others).
// Throws what gloo throws.
std::vector<SizeResult> run_raw_gloo_rank(int rank, const std::string& store_dir, const JobSpec& spec);

}  // namespace bench
}  // namespace distcomm
