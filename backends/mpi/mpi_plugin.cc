// libdistcomm_mpi.so: the descriptor and factory of the mpi backend.
//
// The backend finds its peers through MPI itself (DISTCOMM_PLUGIN_SELF_RENDEZVOUS): rank
// and world size come from mpirun, no store or MASTER_ADDR is needed, and the options'
// rank and size are checked against MPI's.
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "api/errors.h"
#include "api/plugin.h"
#include "backends/mpi/mpi_backend.h"
#include "backends/mpi/mpi_runtime.h"

namespace distcomm {
namespace mpi {
namespace {

// Variables a process started by an MPI launcher finds in its environment: Open MPI's
// mpirun, a PMIx launcher (prterun, srun --mpi=pmix), a PMI-1/2 one (MPICH's hydra, srun).
bool started_by_mpi_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

void check_launch(const BackendOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  // Without a launcher, MPI_Init makes a world of one ("singleton"): a bigger world can
  // only hang or fail later, so say how to start the job now.
  if (options.size > 1 && !initialized && !started_by_mpi_launcher()) {
    throw BackendUnavailable(
        "mpi backend: a world of " + std::to_string(options.size) +
        " processes must be started by an MPI launcher, e.g. `mpirun -np " + std::to_string(options.size) +
        " <program> ...` (or srun with PMIx); this process has none of OMPI_COMM_WORLD_SIZE, PMIX_RANK, "
        "PMI_RANK in its environment");
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

// config "progress": "waiters" (default: threads that wait run MPI's progress, when MPI
// allows it) or "thread" (only the plugin's MPI thread calls MPI; waiters block).
bool waiters_drive(const BackendOptions& options) {
  auto it = options.config.find("progress");
  if (it == options.config.end() || it->second == "waiters") return true;
  if (it->second == "thread") return false;
  throw InvalidArgument("mpi backend: config progress='" + it->second + "' must be 'waiters' or 'thread'");
}

int available(std::string* why) {
  (void)why;  // linked against libmpi: it is here. Whether a launcher started us is checked at create.
  return 1;
}

Backend* create(const BackendOptions& options) {
  if (options.device != DeviceType::kCPU) {
    throw BackendUnavailable(std::string("mpi backend serves cpu tensors only, not ") +
                             device_type_name(options.device));
  }
  check_launch(options);
  Runtime& runtime = Runtime::start(waiters_drive(options));
  check_world(options, runtime);
  return new MpiBackend(options, runtime);
}

}  // namespace
}  // namespace mpi
}  // namespace distcomm

DISTCOMM_DEFINE_PLUGIN("mpi",
                       "Open MPI " DISTCOMM_STR(OMPI_MAJOR_VERSION) "." DISTCOMM_STR(OMPI_MINOR_VERSION) "." DISTCOMM_STR(
                           OMPI_RELEASE_VERSION),
                       DISTCOMM_DEVICE_CPU, DISTCOMM_PLUGIN_SELF_RENDEZVOUS, distcomm::mpi::available,
                       distcomm::mpi::create)
