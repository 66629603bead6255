// Which part a rank of a group takes in ncclCommSplit when a subgroup is made from the
// group (Backend::create_subgroup_backend). No NCCL here, so the rule is tested on machines
// without a GPU.
//
// ncclCommSplit is collective over the parent communicator: every rank of the parent calls
// it once, members of a new communicator with its color, the others with
// NCCL_SPLIT_NOCOLOR. Ranks of one color form one communicator, ordered by key.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "api/store/store.h"

namespace distcomm {
namespace nccl {

// NCCL_SPLIT_NOCOLOR, without nccl.h.
constexpr int kSplitNoColor = -1;

struct SplitPart {
  int color = kSplitNoColor;
  int key = 0;
};

// members: the subgroup's ranks as ranks of the parent, subgroup rank i = members[i];
// member: whether this rank is in it. The color is the subgroup's lowest parent rank, so
// the disjoint subgroups of one split() get distinct colors and every member the same;
// the key is the rank's place in members, so NCCL's ranks are the subgroup's ranks.
SplitPart split_part(int parent_rank, const std::vector<int>& members, bool member);

// Whether every one of the `size` ranks of a group can take part in a split (`can`: this
// rank's parent communicator is set up and usable), agreed through the group's store, vote
// `index` of the group (0, 1, ...: the group's subgroups in the order made, the same on every
// rank) under keys starting with `prefix`. Why agree rather than decide alone: a rank's
// communicator is set up by its first op, which another thread may be issuing while the
// subgroup is made, so one rank could find it ready and split while another takes the store
// path, and the splitting rank would wait out the timeout in ncclCommSplit. Every rank gets
// the same answer: true only when all said they can.
//
// One add per rank carries both its arrival and its word (a rank that cannot adds 2^32 + 1),
// so the last to arrive knows the answer and writes it under one key, which the others wait
// for (one wait, one read, whatever the group's size). A rank that cannot returns false at
// once: where the others have no communicator either (the usual case) nobody waits, and a
// rank that never comes (one of a mixed group whose nccl backend could not be made) costs
// nothing then. Keys do not pile up with the subgroups made: the last to arrive deletes the
// count and the previous vote's answer (every rank has read it: it is here), so a group
// keeps one key. Throws Timeout, naming `what`, when not every rank has said by the
// deadline (a rank died, or did not make the subgroup) and this one can.
bool every_rank_can_split(Store& store, const std::string& prefix, uint64_t index, int size, bool can,
                          std::chrono::steady_clock::time_point deadline, const std::string& what);

}  // namespace nccl
}  // namespace distcomm
