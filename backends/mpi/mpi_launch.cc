#include "backends/mpi/mpi_launch.h"

#include <cstdlib>

namespace distcomm {
namespace mpi {
namespace {

struct Variables {
  const char* launcher;
  const char* rank;
  const char* size;
};

// The MPI-capable launchers init knows (api/group/environment.cc), in its order.
const Variables kMpiLaunchers[] = {
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS"},
    {"pmi", "PMI_RANK", "PMI_SIZE"},
    {"pmix", "PMIX_RANK", nullptr},
};

// A non-negative integer, or -1 when unset or not one.
int read_count(const char* name) {
  const char* text = name ? std::getenv(name) : nullptr;
  if (!text || !*text) return -1;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return *end == '\0' && value >= 0 && value < (1L << 30) ? static_cast<int>(value) : -1;
}

std::string setting(const char* name) {
  const char* text = std::getenv(name);
  return text ? std::string(name) + "=" + text : std::string();
}

}  // namespace

MpiLaunch find_mpi_launch() {
  for (const Variables& v : kMpiLaunchers) {
    const int rank = read_count(v.rank);
    if (rank < 0) continue;
    MpiLaunch l;
    l.launcher = v.launcher;
    l.rank_variable = v.rank;
    l.rank = rank;
    l.size_variable = v.size ? v.size : "";
    l.size = read_count(v.size);
    return l;
  }
  return {};
}

std::string world_disagreement(const MpiLaunch& launch, const std::string& init_launcher, int rank, int size) {
  const bool rank_differs = rank != launch.rank;
  const bool size_differs = launch.size >= 0 && size != launch.size;
  if (launch.launcher.empty() || (!rank_differs && !size_differs)) return "";
  std::string mpi_says = launch.rank_variable + "=" + std::to_string(launch.rank);
  if (launch.size >= 0) mpi_says += " and " + launch.size_variable + "=" + std::to_string(launch.size);
  // Where init's numbers came from: torchrun's variables win over an MPI launcher's there.
  std::string torchrun;
  for (const char* name : {"RANK", "WORLD_SIZE"}) {
    const std::string s = setting(name);
    if (!s.empty()) torchrun += (torchrun.empty() ? "" : " and ") + s;
  }
  const std::string source =
      init_launcher != "torchrun" || torchrun.empty() ? std::string("the program's InitOptions")
                       : torchrun + " (torchrun's variables, which init reads before " + launch.launcher + "'s)";
  return "this process is rank " + std::to_string(rank) + " of " + std::to_string(size) + " by " + source +
         ", but " + launch.launcher + " started it as rank " + std::to_string(launch.rank) +
         (launch.size >= 0 ? " of " + std::to_string(launch.size) : std::string()) + " (" + mpi_says +
         "), and an MPI communicator has MPI's ranks: unset RANK and WORLD_SIZE under " + launch.launcher +
         " (left over from a torchrun shell?), or give them MPI's values";
}

}  // namespace mpi
}  // namespace distcomm
