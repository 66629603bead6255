// libdistcomm_mpi.so: the descriptor and factory of the mpi backend.
//
// The backend finds its peers through MPI itself (DISTCOMM_PLUGIN_SELF_RENDEZVOUS): rank
// and world size come from mpirun, no store or MASTER_ADDR is needed, and the options'
// rank and size are checked against MPI's.
#include <mpi.h>

#include <string>

#include "api/diagnostics/op_fingerprint.h"
#include "api/errors.h"
#include "api/plugin/plugin.h"
#include "backends/mpi/mpi_backend.h"
#include "backends/mpi/mpi_launch.h"
#include "backends/mpi/mpi_runtime.h"

namespace distcomm {
namespace mpi {
namespace {

// Whether an MPI-capable launcher started the process: Open MPI's mpirun, srun, a PMI-1/2
// one (MPICH's hydra) or a PMIx one (prterun). Read here, not from init's config
// "launcher": init names the first launcher it finds, torchrun's variables first, and
// those may be left over in the shell of an mpirun job (mpi_launch.h). torchrun-style
// variables alone (tools/launch, spawn) do not make an MPI job.
void check_launch(const BackendOptions& options, const MpiConfig& config) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  const MpiLaunch launch = find_mpi_launch();
  // Without a launcher, MPI_Init makes a world of one ("singleton"): a bigger world can
  // only hang or fail later, so say how to start the job now.
  if (options.size > 1 && !initialized && launch.launcher.empty()) {
    throw BackendUnavailable(
        "mpi backend: a world of " + std::to_string(options.size) +
        " processes must be started by an MPI launcher, e.g. `mpirun -np " + std::to_string(options.size) +
        " <program> ...` (or srun with PMIx); init found none of OMPI_COMM_WORLD_RANK, SLURM_PROCID, "
        "PMI_RANK, PMIX_RANK in the environment" +
        (config.launcher.empty() ? std::string() : " (only " + config.launcher + "'s variables)"));
  }
  // Before MPI starts: a rank that disagrees would otherwise wait in MPI_Init for its peers
  // and only then be refused (check_world), or leave its peers waiting there.
  if (options.group_name == "world" && !initialized) {
    const int world_rank = options.global_ranks.empty() ? options.rank : options.global_ranks.at(options.rank);
    const std::string problem = world_disagreement(launch, config.launcher, world_rank, options.size);
    if (!problem.empty()) throw InvalidArgument("mpi backend: " + problem);
  }
}

// The options come from init (OMPI_COMM_WORLD_*, or RANK/WORLD_SIZE if set) or from a
// parent group; MPI has its own view. They must agree, or ranks would talk past each other.
void check_world(const BackendOptions& options, const Runtime& runtime) {
  const int world_rank = options.global_ranks.empty() ? options.rank : options.global_ranks.at(options.rank);
  bool agree = world_rank == runtime.world_rank();
  for (int r : options.global_ranks) agree = agree && r < runtime.world_size();
  // The group init_process_group makes is the whole world; subgroups are named below it.
  if (options.group_name == "world") agree = agree && options.size == runtime.world_size();
  if (!agree) {
    throw InvalidArgument(
        "mpi backend: group '" + options.group_name + "' places this process at world rank " +
        std::to_string(world_rank) + " of " + std::to_string(options.size) + ", but MPI says rank " +
        std::to_string(runtime.world_rank()) + " of " + std::to_string(runtime.world_size()) +
        ": with the mpi backend let rank and world size come from mpirun (unset RANK and WORLD_SIZE, "
        "or give MPI's values)");
  }
}

int available(std::string* why) {
  (void)why;  // linked against libmpi: it is here. Whether a launcher started us is checked at create.
  return 1;
}

Backend* create(const BackendOptions& options) { return create_mpi_backend(options, nullptr); }

}  // namespace

Backend* create_mpi_backend(const BackendOptions& options, const MpiBackend* parent) {
  if (options.device != DeviceType::kCPU) {
    throw BackendUnavailable(std::string("mpi backend serves cpu tensors only, not ") +
                             device_type_name(options.device));
  }
  const MpiConfig config = MpiConfig::parse(options.config);
  check_launch(options, config);
  // One deadline for starting MPI and creating the group's communicator: what is left of
  // the group's creation (init_wait.h).
  const InitWait wait = InitWait::for_backend(
      options.config, options.timeout,
      group_rank_text(options.rank, options.size, options.group_name, options.global_ranks) + " (mpi)",
      options.global_ranks, options.store.get());
  Runtime& runtime = Runtime::start(config, wait);
  check_world(options, runtime);
  return new MpiBackend(options, config, runtime, wait, parent);
}

}  // namespace mpi
}  // namespace distcomm

// Diagnostics: how many groups' communicators this process's MPI runtime serves, -1 before
// one started it. A group that fails to be made must leave it unchanged
// (tests/backends/mpi:failed_new_group_leaves_no_communicator_test, which finds it with
// dlsym in the loaded plugin).
extern "C" __attribute__((visibility("default"))) long distcomm_mpi_groups_served() {
  distcomm::mpi::Runtime* runtime = distcomm::mpi::Runtime::started();
  return runtime ? static_cast<long>(runtime->groups_served()) : -1;
}

DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("mpi",
                       "Open MPI " DISTCOMM_STR(OMPI_MAJOR_VERSION) "." DISTCOMM_STR(OMPI_MINOR_VERSION) "." DISTCOMM_STR(
                           OMPI_RELEASE_VERSION) ", distcomm " DISTCOMM_VERSION,
                       DISTCOMM_DEVICE_CPU, DISTCOMM_PLUGIN_SELF_RENDEZVOUS, distcomm::mpi::available,
                       distcomm::mpi::create, distcomm::mpi::kConfigKeys)
