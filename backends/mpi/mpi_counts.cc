#include "backends/mpi/mpi_counts.h"

#include <algorithm>
#include <climits>

namespace distcomm {
namespace mpi {

namespace {

// What the limit is, for the messages: MPI's int, or the configured one.
std::string limit_text(int64_t limit) {
  if (limit >= INT_MAX) return "MPI's int count";
  return "the mpi backend's max_count_per_call (" + std::to_string(limit) + " elements per MPI call)";
}

}  // namespace

std::string per_rank_count_problem(const char* what, int64_t count, int64_t limit) {
  limit = std::min<int64_t>(limit, INT_MAX);
  if (count <= limit) return "";
  return std::string(what) + " of " + std::to_string(count) + " elements per rank exceeds " + limit_text(limit) +
         " per rank (" + std::to_string(limit) + "; the limit is per rank, not on the total): split the tensor "
         "into ops of at most " + std::to_string(limit) + " elements per rank, or use the gloo or shm backend";
}

std::string alltoallv_count_problem(const std::vector<int64_t>& counts, const char* side, int64_t limit) {
  limit = std::min<int64_t>(limit, INT_MAX);
  int64_t displacement = 0;
  for (size_t peer = 0; peer < counts.size(); ++peer) {
    if (counts[peer] > limit) {
      return std::string("all_to_all's ") + side + " block for rank " + std::to_string(peer) + " has " +
             std::to_string(counts[peer]) + " elements, more than " + limit_text(limit) + " per peer (" +
             std::to_string(limit) + "; the limit is per peer, not on the total): split the all_to_all into "
             "several with at most " + std::to_string(limit) + " elements per peer, or use the gloo or shm backend";
    }
    if (counts[peer] > 0 && displacement > INT_MAX) {
      return std::string("all_to_all's ") + side + " block for rank " + std::to_string(peer) +
             " starts at element " + std::to_string(displacement) +
             ", beyond MPI_Alltoallv's int displacement (2147483647; each block must start within the "
             "first 2147483648 elements of the tensor): split the all_to_all into several with less "
             "data per peer, or use the gloo or shm backend";
    }
    displacement += counts[peer];
  }
  return "";
}

}  // namespace mpi
}  // namespace distcomm
