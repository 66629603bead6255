// Which element counts one MPI call can take (MPI counts and displacements are int), apart
// from MPI itself so that the decisions are unit-tested (tests/backends/mpi/mpi_counts_test).
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace distcomm {
namespace mpi {

// Why one rank's block of a gather-like op (all_gather, gather, scatter, reduce_scatter:
// MPI's count is per rank, the op moves one such block per rank) cannot go in one MPI call,
// or "" when it can. what: "all_gather". limit: the elements one MPI call may take, INT_MAX
// or the backend's max_count_per_call when set lower (these ops are not split, so a lower
// limit refuses them as INT_MAX does).
std::string per_rank_count_problem(const char* what, int64_t count, int64_t limit = INT_MAX);

// Why MPI_Ialltoallv cannot take an all_to_all's counts, or "" when it can. Its counts are
// per peer, so the total may exceed INT_MAX; but each peer's count, and each peer's
// displacement (where its block starts, in elements), must fit an int. side: "input"/"output".
// limit: per peer, as per_rank_count_problem's (a displacement is MPI's int whatever it is).
std::string alltoallv_count_problem(const std::vector<int64_t>& counts, const char* side, int64_t limit = INT_MAX);

}  // namespace mpi
}  // namespace distcomm
