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

std::string AbandonedOps::waited_for() const {
  std::string named;
  bool unnamed = false;
  for (const Kept& k : ops_) {
    const Op& op = *k.op;
    if (!is_p2p(op.call) || op.root == MPI_ANY_SOURCE || k.comm == MPI_COMM_NULL) {
      unnamed = true;
      continue;
    }
    int world = MPI_UNDEFINED;
    MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
    if (MPI_Comm_group(k.comm, &group) == MPI_SUCCESS && MPI_Comm_group(MPI_COMM_WORLD, &world_group) == MPI_SUCCESS) {
      MPI_Group_translate_ranks(group, 1, &op.root, world_group, &world);
    }
    if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
    if (world_group != MPI_GROUP_NULL) MPI_Group_free(&world_group);
    if (world == MPI_UNDEFINED) {
      unnamed = true;
      continue;
    }
    named += (named.empty() ? "" : ", ") + std::string("world rank ") + std::to_string(world) + " (a " +
             (op.call == Call::kSend ? "send" : "recv") + " of tag " + std::to_string(op.tag) + ")";
  }
  std::string text = named.empty() ? "" : "peer " + named;
  if (unnamed) {
    text += std::string(named.empty() ? "a peer" : "; and a peer") +
            " of a collective or of a recv from any rank, which MPI cannot name (without a store the peer cannot be "
            "named; with one, the op's Timeout names it: " + std::string(kStoreAdvice) + ")";
  }
  return text.empty() ? "that peer" : text;
}

}  // namespace mpi
}  // namespace distcomm
