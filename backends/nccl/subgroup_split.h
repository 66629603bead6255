// Which part a rank of a group takes in ncclCommSplit when a subgroup is made from the
// group (Backend::create_subgroup_backend). No NCCL here, so the rule is tested on machines
// without a GPU.
//
// ncclCommSplit is collective over the parent communicator: every rank of the parent calls
// it once, members of a new communicator with its color, the others with
// NCCL_SPLIT_NOCOLOR. Ranks of one color form one communicator, ordered by key.
#pragma once

#include <vector>

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

}  // namespace nccl
}  // namespace distcomm
