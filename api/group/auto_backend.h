// The backend names "auto" and "hier": per group, the fastest CPU backends its ranks'
// placement allows.
//
// auto's rule: "shm" when every rank of the group can share memory with every other (the
// same shared_memory_domain(): one host, one PID namespace, one DISTCOMM_HOST_ID) and can
// load the shm plugin; else "hier" where the ranks sit on two or more hosts, some host
// holding two or more of them, and every rank can run shm (hierarchical_backend.h); else
// "gloo". "auto" alone means "cpu:auto";
// "cpu:auto,cuda:nccl" adds NCCL for CUDA tensors. Each group decides for itself, so a
// subgroup of the ranks of one host gets shm inside a multi-host job. The ranks exchange
// their placement once, when the group is created (over the group's store).
//
// "hier" asks for the hierarchy (shm within each host, gloo across: host_layout.h,
// hierarchical_backend.h): it is built when the ranks sit on two or more hosts, some host
// holds two or more of them, and every rank can run shm; where it cannot be (one host, one rank per host, a rank without shm) the group runs flat
// on gloo, and its backend_name() says why.
#pragma once

#include <string>
#include <vector>

#include "api/group/process_environment.h"

namespace distcomm {

// What two processes compare to know they can map each other's memory: the kernel's boot
// id and the PID namespace (shared memory between processes of one host goes through
// /proc/<pid>, which only shows the processes of one's own namespace).
std::string shared_memory_domain();

// This process's placement, as the ranks exchange it: its domain, its host id
// (DISTCOMM_HOST_ID, process_environment.h) and whether the shm plugin loads (found through
// `plugins`) and can run here.
std::string auto_backend_placement(const PluginSearch& plugins, const std::string& host_id = "");

// The backends "auto" (and "hier") may pick here, whose settings a group with it accepts:
// shm (when its plugin loads) and gloo.
std::vector<std::string> auto_backend_candidates(const PluginSearch& plugins);

// The rule above, over every rank's auto_backend_placement(): "shm", "hier" or "gloo".
std::string choose_auto_cpu_backend(const std::vector<std::string>& placements);

// For an explicit "hier": "" when the placements allow the hierarchy, else why the group
// runs flat ("one host", "one rank per host", "rank 2 cannot run shm").
std::string why_not_hierarchical(const std::vector<std::string>& placements);

}  // namespace distcomm
