// The agreement check that runs before a collective's MPI call.
//
// MPI collectives carry no tag: ranks that call different ones at the same place -- other
// counts, dtypes, roots, reductions, or a skipped collective -- get undefined behaviour
// from MPI (a rank killed in libnbc, a corrupted heap, wrong values with a success status).
// So before the op's own call, every rank contributes its fingerprint's agreement hash h
// (api/diagnostics/op_fingerprint.h) to one 16-byte MPI_Iallreduce of [h, ~h] with MPI_MIN: the result
// is [min h, ~max h], the same on every rank, and the ranks agree exactly when min == max.
// Every rank sends the same check, whatever op it runs, so the checks themselves always
// match. An all_to_all that passes (all ranks run it, with the same dtype) then checks
// its splits the same way: one MPI_Iallreduce SUM of OpFingerprint::split_pairs_sum, 0
// when every pair agrees. When a check fails, every rank knows it at once; they then
// gather each other's fingerprints (a fixed-size MPI_Iallgather) and every rank ends the op
// with Desync and the table of what each rank called.
//
// A barrier needs no call of its own: the check is one (no rank gets its result before
// every rank has contributed).
//
// Cost: one small MPI_Iallreduce per collective, which at 8 B is about what the op itself
// costs; config agreement_check=0 turns it off (docs/failures.md, "When a job fails").
#pragma once

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <vector>

#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {
namespace mpi {

class Agreement {
 public:
  // fingerprint: what this rank calls; rank, size: its place in the group.
  Agreement(const OpFingerprint& fingerprint, int rank, int size);

  // Starts the hash check. Null or MPI's error.
  std::exception_ptr start(MPI_Comm comm);
  // Tests the running check and starts the next stage. Sets *passed once every rank agrees;
  // returns Desync (after the table) when they do not, or MPI's error.
  std::exception_ptr advance(MPI_Comm comm, bool* passed);
  // Whether MPI still holds a request of the check (its buffers must stay alive).
  bool pending() const { return request_ != MPI_REQUEST_NULL; }
  // An abandoned check: true once its request has ended.
  bool test_abandoned();

 private:
  enum class Stage : uint8_t { kHash, kPairs, kTable, kPassed };
  std::exception_ptr start_table(MPI_Comm comm);
  std::exception_ptr desync() const;

  OpFingerprint fingerprint_;
  int rank_ = 0;
  int size_ = 1;
  Stage stage_ = Stage::kHash;
  MPI_Request request_ = MPI_REQUEST_NULL;
  uint64_t send_[2] = {};
  uint64_t result_[2] = {};
  std::vector<char> table_;  // every rank's encoded fingerprint, kSlotBytes each
};

}  // namespace mpi
}  // namespace distcomm
