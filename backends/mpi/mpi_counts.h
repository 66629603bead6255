// Which element counts one MPI call can take (MPI counts and displacements are int), apart
// from MPI itself so that the decisions are unit-tested (tests/backends/mpi/mpi_counts_test).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distcomm {
namespace mpi {

// Why one rank's block of a gather-like op (all_gather, gather, scatter, reduce_scatter:
// MPI's count is per rank, the op moves one such block per rank) cannot go in one MPI call,
// or "" when it can. what: "all_gather".
std::string per_rank_count_problem(const char* what, int64_t count);

// Why MPI_Ialltoallv cannot take an all_to_all's counts, or "" when it can. Its counts are
// per peer, so the total may exceed INT_MAX; but each peer's count, and each peer's
// displacement (where its block starts, in elements), must fit an int. side: "input"/"output".
std::string alltoallv_count_problem(const std::vector<int64_t>& counts, const char* side);

}  // namespace mpi
}  // namespace distcomm
