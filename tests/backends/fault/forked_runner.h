// A fault-suite Runner whose ranks are processes started as a program's are: forked
// children that call init_process_group at tcp://127.0.0.1:<free port>, rank 0 serving the
// TCPStore, with a fresh job identity. The board is a FileStore in the run's own folder.
// For the backends that run between processes of one host: gloo, shm, auto.
#pragma once

#include <string>
#include <vector>

#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {

// host_ids: rank r runs with DISTCOMM_HOST_ID=host_ids[r] (simulated hosts, for "hier"),
// and the job has that many ranks; empty: unset, and kRanks ranks.
RunnerPtr forked_runner(const std::string& backend, std::vector<std::string> host_ids = {});
// A job of `ranks` ranks, DISTCOMM_HOST_ID unset.
RunnerPtr forked_runner_of(const std::string& backend, int ranks);

}  // namespace fault
}  // namespace distcomm
