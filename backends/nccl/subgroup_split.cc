#include "backends/nccl/subgroup_split.h"

#include <algorithm>
#include <string>

#include "api/errors.h"

namespace distcomm {
namespace nccl {

SplitPart split_part(int parent_rank, const std::vector<int>& members, bool member) {
  if (!member) return {};
  const auto me = std::find(members.begin(), members.end(), parent_rank);
  if (me == members.end()) {
    throw InvalidArgument("nccl backend: rank " + std::to_string(parent_rank) +
                          " is asked to join a subgroup whose members do not list it");
  }
  return {*std::min_element(members.begin(), members.end()), static_cast<int>(me - members.begin())};
}

}  // namespace nccl
}  // namespace distcomm
