// The backend name "auto": per group, the fastest CPU backend its ranks' placement allows.
//
// Rule: "shm" when every rank of the group can share memory with every other (the same
// shared_memory_domain(): one host, one PID namespace) and can load the shm plugin; else
// "gloo". "auto" alone means "cpu:auto"; "cpu:auto,cuda:nccl" adds NCCL for CUDA tensors.
// Each group decides for itself, so a subgroup of the ranks of one host gets shm inside a
// multi-host job. The ranks exchange their placement once, when the group is created
// (ProcessGroup::exchange(), over the group's store).
#pragma once

#include <string>
#include <vector>

#include "api/group/process_environment.h"

namespace distcomm {

// What two processes compare to know they can map each other's memory: the kernel's boot
// id and the PID namespace (shared memory between processes of one host goes through
// /proc/<pid>, which only shows the processes of one's own namespace).
std::string shared_memory_domain();

// This process's placement, as the ranks exchange it: its domain, and whether the shm
// plugin loads (found through `plugins`) and can run here.
std::string auto_backend_placement(const PluginSearch& plugins);

// The backends "auto" may pick here, whose settings a group with it accepts: shm (when its
// plugin loads) and gloo.
std::vector<std::string> auto_backend_candidates(const PluginSearch& plugins);

// The rule above, over every rank's auto_backend_placement(): "shm" or "gloo".
std::string choose_auto_cpu_backend(const std::vector<std::string>& placements);

}  // namespace distcomm
