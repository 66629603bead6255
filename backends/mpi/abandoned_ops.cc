#include "backends/mpi/abandoned_ops.h"

#include <algorithm>

namespace distcomm {
namespace mpi {
namespace {

void free_comm(MPI_Comm comm) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm);
}

}  // namespace

void AbandonedOps::add(MPI_Comm comm, std::unique_ptr<Op> op) { ops_.push_back({comm, std::move(op)}); }

bool AbandonedOps::in_use(MPI_Comm comm) const {
  return std::any_of(ops_.begin(), ops_.end(), [comm](const Kept& k) { return k.comm == comm; });
}

void AbandonedOps::retire(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return;
  if (in_use(comm)) {
    retired_.push_back(comm);
  } else {
    free_comm(comm);
  }
}

void AbandonedOps::test() {
  ops_.erase(std::remove_if(ops_.begin(), ops_.end(), [](Kept& k) { return test_abandoned(*k.op); }), ops_.end());
  retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                [this](MPI_Comm comm) {
                                  if (in_use(comm)) return false;
                                  free_comm(comm);
                                  return true;
                                }),
                 retired_.end());
}

}  // namespace mpi
}  // namespace distcomm
