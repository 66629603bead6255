// One rank of a job that runs the standalone gloo program's loop (timed_loop.h) through
// distcomm instead: init_process_group over the gloo plugin, then ProcessGroup's op with
// .wait() per iteration, the pattern that most programs use.
#pragma once

#include <string>
#include <vector>

#include "api/process/job_identity.h"
#include "tools/bench/overhead/job_spec.h"
#include "tools/bench/overhead/timed_loop.h"

namespace distcomm {
namespace bench {

struct DistcommJobOptions {
  int port = 0;  // rank 0's TCPStore, on 127.0.0.1
  JobIdentity identity;
  // The plugin's all_reduce algorithm ("auto", "ring", ...); for all_reduce only.
  std::string algorithm = "auto";
};

// Results on rank 0 (nothing on the others); throws what distcomm throws.
std::vector<SizeResult> run_distcomm_rank(int rank, const JobSpec& spec, const DistcommJobOptions& options);

}  // namespace bench
}  // namespace distcomm
