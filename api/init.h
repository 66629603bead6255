// init_process_group: from a launcher's environment (or explicit options) to a ready group.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "api/process/job_identity.h"
#include "api/process_group.h"
#include "api/store/store.h"

namespace distcomm {

// Where this process sits in the job, as its launcher described it.
struct LaunchEnv {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  std::string master_addr;
  int master_port = -1;
  std::string source;  // "torchrun" (RANK...), "mpirun" (OMPI_COMM_WORLD_*), "slurm", or ""
};

// Reads RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT, then Open MPI's
// OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}, then Slurm's SLURM_{PROCID,NTASKS,LOCALID},
// then PMI's PMI_{RANK,SIZE} with MPI_LOCAL{RANKID,NRANKS}, then PMIx's PMIX_RANK.
// Malformed numbers throw InvalidArgument naming the variable.
LaunchEnv read_launch_env();

// The job's identity in this process's environment, $DISTCOMM_RUN_ID and
// $DISTCOMM_STORE_TOKEN (either part may be empty); what init_process_group reads when
// InitOptions::identity is empty.
JobIdentity identity_from_environment();

// The settings init_process_group gives backend `backend` (a spec: "gloo", "auto", ...):
// `given` (the program's, which win), then this rank's launch environment (local_rank,
// launcher) and the settings' variables (DISTCOMM_SOCKET_IFNAME, ...), and MASTER_ADDR as
// "master_addr", from which gloo picks the address towards the job's store. For groups a
// program makes over a store of its own (ft::Manager), so that they listen where
// init_process_group's would: without it, a group spanning hosts listened on the host
// name, which resolves to loopback on many machines (Debian's /etc/hosts).
std::map<std::string, std::string> backend_config_as_init_gives(const std::string& backend,
                                                                std::map<std::string, std::string> given);

// init's report interval as the environment sets it: $DISTCOMM_INIT_REPORT_SECONDS (a
// positive number of seconds, fractions allowed), else 30 s (kDefaultInitReportInterval);
// what init_process_group uses when InitOptions::init_report_interval is zero. For the waits
// of a program's own groups that report as init's do (ft::Manager's formings and a joiner's
// wait to be taken in). Throws InvalidArgument naming the variable for a malformed value.
std::chrono::milliseconds init_report_interval_from_environment();

// $DISTCOMM_BACKEND as init_process_group reads it when InitOptions::backend is empty (""
// when unset: init then takes "auto"). For a program's own groups, whose backend spec comes
// from where init's would (ft::Manager's generations): one reading of the variable.
std::string backend_from_environment();

// Whether the launcher serves the job's TCPStore, as init_process_group reads
// $DISTCOMM_STORE_SERVED_BY for env:// (StoreServedBy::kEnvironment): true for "launcher",
// false when unset or empty; any other value throws init's own InvalidArgument, naming the
// variable. For a program that connects to the job's store itself (ft::Manager), so that it
// refuses what init refuses, in the same words, rather than take a mistyped value for
// "rank 0 serves it".
bool store_served_by_launcher_from_environment();

// Whether a launcher gave this process a rank (read_launch_env() found one: tools/launch,
// torchrun, spawn, mpirun, srun, a PMI launcher). A program that starts its own ranks
// when run by hand asks this first.
bool launched_as_rank();

// Who serves the job's TCPStore (env:// and tcp://).
enum class StoreServedBy {
  // env://: the launcher when $DISTCOMM_STORE_SERVED_BY is "launcher" (tools/launch and
  // spawn() set it for their ranks), else rank 0. tcp://host:port: rank 0.
  kEnvironment,
  // Rank 0 serves it, in a thread of its own (a job started by hand, mpirun, srun).
  kRankZero,
  // A process that outlives the ranks serves it (a launcher, or the program's own
  // TCPStoreServer); rank 0 connects to it as every other rank does, so that the survivors
  // of rank 0's death still share it.
  kLauncher,
};

struct InitOptions {
  // "gloo", "mpi", "nccl", "cpu:gloo,cuda:nccl", "auto"; empty: $DISTCOMM_BACKEND, else
  // "auto" (group/auto_backend.h: shm on one host, and nccl for CUDA tensors where every
  // rank can run it; DISTCOMM_BACKEND=gloo keeps gloo).
  std::string backend;
  // "env://" (MASTER_ADDR/MASTER_PORT), "tcp://host:port", "file:///path"; as torch takes
  // them, each may end in "?rank=R&world_size=N" (over RANK and WORLD_SIZE; rank and
  // world_size below must agree with it), and tcp://'s in a '/' after the port.
  std::string init_method = "env://";
  int rank = -1;        // -1: from the environment
  int world_size = -1;  // -1: from the environment
  std::chrono::milliseconds timeout = kDefaultGroupTimeout;  // positive (0 or less: InvalidArgument)
  StorePtr store;  // if set, used instead of init_method
  std::map<std::string, std::string> backend_config;
  // The job's identity (docs/security.md): rank 0's TCPStore admits only ranks with its run
  // id and token, and a FileStore reads only its run's keys. Both empty: from
  // $DISTCOMM_RUN_ID and $DISTCOMM_STORE_TOKEN (tools/launch and spawn() set them); none
  // at all: the store is unauthenticated, and rank 0 warns.
  JobIdentity identity;
  // Where rank 0's TCPStore listens: "" is $DISTCOMM_STORE_BIND, else MASTER_ADDR's
  // address; "*" every interface; else that address. Unused when the launcher serves it.
  std::string store_bind;
  // Who serves the TCPStore: the launcher or rank 0 (StoreServedBy).
  StoreServedBy store_served_by = StoreServedBy::kEnvironment;
  // "OFF", "INFO" or "DETAIL" (debug_level.h); "": $DISTCOMM_DEBUG, else OFF.
  std::string debug;
  // While init waits for other ranks (rank 0's store, the others' arrival, the backend's
  // rendezvous), every this often it logs which ranks it still waits for (init_wait.h).
  // Zero: $DISTCOMM_INIT_REPORT_SECONDS, else 30 s. The whole of init ends within timeout.
  std::chrono::milliseconds init_report_interval{0};
};

// Creates the world group and makes it the default group. Throws InvalidArgument for
// missing or inconsistent rank/world/address, Timeout naming the ranks that did not come
// within options.timeout (counted from the call, for every phase together), StoreError
// when the store refuses this rank, BackendUnavailable when the backend cannot be loaded.
ProcessGroupPtr init_process_group(InitOptions options = {});

bool is_initialized();
// The group made by init_process_group; throws if there is none.
ProcessGroup& default_group();
ProcessGroupPtr default_group_ptr();
// Drops the default group. The group itself ends (its connections close, its threads stop)
// when the last ProcessGroupPtr to it goes: a pointer the program still holds keeps it
// working, unlike torch's destroy_process_group, which ends the group for every holder.
// init_process_group may then be called again.
void destroy_process_group();

}  // namespace distcomm
