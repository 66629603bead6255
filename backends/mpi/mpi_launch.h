// Whether an MPI launcher started this process, and what it says of the process's place.
//
// Init takes rank and world size from the first launcher whose variables it finds, and
// torchrun's (RANK, WORLD_SIZE) come first: under mpirun in a shell left over from
// torchrun, they are set too. The mpi backend's communicator has MPI's ranks whatever init
// chose, so it reads the MPI launchers' variables itself: their presence means MPI will
// find its peers, and a group whose rank or size disagrees with them is refused before
// MPI starts, naming which variable says what.
#pragma once

#include <string>

namespace distcomm {
namespace mpi {

struct MpiLaunch {
  std::string launcher;       // "mpirun", "slurm", "pmi", "pmix"; "" when none
  std::string rank_variable;  // OMPI_COMM_WORLD_RANK, ...
  int rank = -1;
  std::string size_variable;  // "" where the launcher sets none (PMIx)
  int size = -1;              // -1: not set
};

// The first MPI launcher whose rank variable is set, in init's order of precedence.
MpiLaunch find_mpi_launch();

// "" when a world group placed at `rank` of `size` agrees with the launch; else why not,
// naming the variables and their values. init_launcher: the launcher whose variables init
// read (config "launcher"): "torchrun" names RANK and WORLD_SIZE as the group's source.
std::string world_disagreement(const MpiLaunch& launch, const std::string& init_launcher, int rank, int size);

}  // namespace mpi
}  // namespace distcomm
