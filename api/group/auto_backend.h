// The backend names "auto" and "hier": per group, the fastest CPU backends its ranks'
// placement allows.
//
// auto's rule: "shm" when every rank of the group can share memory with every other (the
// same shared_memory_domain(): one host, one PID namespace, one DISTCOMM_HOST_ID; and one
// effective uid, as shm opens its peers' segments through /proc/<pid>/fd) and can
// load the shm plugin; else "hier" where the ranks sit on two or more hosts, some host
// holding two or more of them, and every rank can run shm (hierarchical_backend.h); else
// "gloo". "auto" alone (the default backend, init.h) also sends CUDA tensors to nccl when
// every rank of the group sees a GPU and can run the nccl plugin; "cpu:auto" never does,
// and "cpu:auto,cuda:nccl" always does. Each group decides for itself, so a
// subgroup of the ranks of one host gets shm inside a multi-host job. The ranks exchange
// their placement once, when the group is created (over the group's store).
//
// "hier" asks for the hierarchy (shm within each host, gloo or mpi across: host_layout.h,
// hierarchical_backend.h): it is built when the ranks sit on two or more hosts, some host
// holds two or more of them, and every rank can run shm; where it cannot be the group runs
// flat, and its backend_name() says why: on shm within one host, else (one rank per host, a
// rank without shm) on the backend across hosts that hier_across picks (choose_across_backend:
// gloo, or mpi under mpirun), so that an explicit mpi is never replaced by gloo in silence.
#pragma once

#include <string>
#include <vector>

#include "api/group/process_environment.h"

namespace distcomm {

// What two processes compare to know they can map each other's memory: the kernel's boot
// id and the PID namespace (shared memory between processes of one host goes through
// /proc/<pid>, which only shows the processes of one's own namespace).
std::string shared_memory_domain();

// Where a process's pid names it, so that a peer can watch it (gloo's ProcessWatch, the
// stall watch's look at /proc/<pid>/stat): the same kernel boot and PID namespace
// (shared_memory_domain()), the same network namespace (a connection that stays open
// after its owner's end is then held by another process of that host, not a link cut
// between namespaces, where no packet says anything), and the same DISTCOMM_HOST_ID (as
// ProcessEnvironment read it): ranks told they are on different hosts (containers that
// share a kernel, tools/netns_hosts.sh) are judged as on different hosts. Two processes
// whose domains differ never look at each other's pids. A part that cannot be read makes
// a domain of this process alone (an unknown part must not match another host's unknown
// part). Never holds a newline: it is published as "<domain>\n<pid>".
std::string process_domain();

// This process's placement, as the ranks exchange it: its domain, its effective uid (ranks
// of one host but different users are on different "hosts" for auto and the hierarchy:
// they cannot open each other's shm segments), its host id
// (DISTCOMM_HOST_ID, process_environment.h) and whether the shm plugin loads (found through
// `plugins`) and can run here; then, after a '|', "nccl" when it sees a GPU and the nccl
// plugin can run here (asked only where a GPU device node exists: loading NCCL costs a
// few hundred ms a process). Before that, after a '|', "mpi" when asked (ask_mpi: the world
// group of a rank mpirun started, whose hier_across allows mpi) and the mpi plugin can run here.
// ask_nccl: only for "auto" alone, the one spec that may add nccl. Before "mpi", after a '|',
// "across=<hier_across>" when given: the ranks must agree on it (choose_across_backend).
// shm is judged for a group of two with the default settings; a group's creation judges it
// for the group it creates (auto_shm_fit.h, the core's own). Part of the plugin ABI: its
// parameters stay as they are (tests/api/group:auto_shm_group_size_test takes its address
// with this type).
std::string auto_backend_placement(const PluginSearch& plugins, const std::string& host_id = "",
                                   bool ask_nccl = false, bool ask_mpi = false, const std::string& hier_across = "");

// Why this process's placement says it cannot run shm, as its last look saw it: the shm
// plugin refused ("the shm plugin cannot be loaded: <file>: refused: dlopen failed: ... Too
// many open files; this process ran out of file descriptors: raise `ulimit -n` ...") or its
// probe's reason ("shm cannot run here: ... ulimit -f ..."); "" when it can, or when no shm
// plugin is installed. Where that reason is a limit of this process, auto also warns once.
std::string why_shm_unused();

// A placement (auto_backend_placement's) without its user: ranks of one machine under
// different users are different hosts to auto and the hierarchy (shm cannot join them),
// and the same machine to a reader of a group's description.
std::string machine_of_placement(const std::string& placement);

// Every rank's exchanged placement, taken apart: what the CPU rule compares (the part
// before '|', as below), whether every rank can run nccl, and which can run mpi.
struct ExchangedPlacements {
  std::vector<std::string> cpu;
  bool all_run_nccl = false;
  std::vector<bool> runs_mpi;  // per rank
  std::vector<bool> runs_nccl;  // per rank: its placement said "nccl" (only "auto" alone asks)
  std::vector<std::string> hier_across;  // per rank: its setting, "" where not exchanged
};
ExchangedPlacements split_placements(const std::vector<std::string>& exchanged);

// Why this process cannot run nccl ("" where it can): no CUDA device node, or the nccl
// plugin's own reason (not built, no usable driver). Loads the plugin only where a device
// node exists, as auto_backend_placement does.
std::string why_nccl_unused(const PluginSearch& plugins);

// Why "auto" alone, from these placements, sends no CUDA tensors to nccl: the ranks that
// cannot run it and, where this rank (`rank`) is one, its own reason (why_nccl_unused);
// "" where every rank can. Kept by the group (GroupBackends::add_left_out), so that a
// CUDA op on a CPU-only node says why rather than only that the group has no backend.
std::string why_auto_left_out_nccl(const ExchangedPlacements& placements, int rank, const PluginSearch& plugins);

// Whether this process sees a CUDA device node (/dev/nvidia<N>): without one, nccl is not
// even loaded.
bool cuda_device_node_present();

// The backends "auto" (and "hier") may pick here, whose settings a group with it accepts:
// shm (when its plugin loads), gloo, and, for "auto" alone (with_nccl), nccl where a GPU
// device node exists and its plugin loads.
std::vector<std::string> auto_backend_candidates(const PluginSearch& plugins, bool with_nccl = false);

// What "auto" (spec_text: the spec as written) resolves to, from every rank's placement:
// the CPU backend ("shm", "hier", "gloo"), whether CUDA tensors go to nccl (only for
// "auto" alone, in a plan without a CUDA backend, when every rank can run it), and what
// the backend's name gets appended (" (cpu: shm, cuda: nccl)"; the hierarchy's CPU part
// comes once it is built).
struct AutoChoice {
  std::string cpu;
  bool with_nccl = false;
  std::string label;
};
AutoChoice choose_auto(const std::string& spec_text, bool plan_has_cuda, const ExchangedPlacements& placements);

// The rule above, over every rank's auto_backend_placement(): "shm", "hier" or "gloo".
std::string choose_auto_cpu_backend(const std::vector<std::string>& placements);

// The hierarchy's backend across hosts (its groups across, and every op it runs flat), from
// the setting hier_across (DISTCOMM_HIER_ACROSS): "gloo" (the default); "mpi", refused with
// the first rank that cannot run it; "auto": mpi when every rank can (the world group of a
// job mpirun started, the mpi plugin runs: Open MPI then uses the job's fast network,
// InfiniBand through UCX), else gloo.
// The ranks must agree on the setting: where they do not, every rank throws the same
// InvalidArgument naming which ranks said what (they all see every rank's placement).
// where: the group, as errors begin ("rank 1/4 group 'world'").
std::string choose_across_backend(const std::string& where, const std::string& setting,
                                  const ExchangedPlacements& placements);
// Throws InvalidArgument (after `where`) unless `setting` is a value hier_across takes.
void check_hier_across(const std::string& where, const std::string& setting);

// For an explicit "hier": "" when the placements allow the hierarchy, else why the group
// runs flat ("one host", "one rank per host", "rank 2 cannot run shm").
std::string why_not_hierarchical(const std::vector<std::string>& placements);

}  // namespace distcomm
