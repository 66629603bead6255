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

bool every_rank_can_split(Store& store, const std::string& key, int size, bool can,
                          std::chrono::steady_clock::time_point deadline, const std::string& what) {
  if (size <= 1) return can;
  // The refusal is counted before the arrival: a rank that sees every rank arrived then
  // reads every refusal (the store applies one client's calls in order).
  if (!can) store.add(key + "cannot", 1);
  // The last to arrive says so under one key: the others wait for it in one store wait
  // rather than polling a count.
  if (store.add(key + "arrived", 1) == size) store.set(key + "all", std::string("1"));
  // A rank that cannot knows the answer already and does not wait: where the others have
  // no communicator either (the usual case) nobody waits, and a rank that never comes
  // (one of a mixed group whose nccl backend could not be made) costs nothing then.
  if (!can) return false;
  const auto start = std::chrono::steady_clock::now();
  // At least 1 ms: a store reads a timeout of zero or less as "the store's default".
  const auto left = std::max(std::chrono::milliseconds(1),
                             std::chrono::duration_cast<std::chrono::milliseconds>(deadline - start));
  try {
    store.wait({key + "all"}, left);
  } catch (const Timeout&) {
    const int64_t arrived = store.add(key + "arrived", 0);
    throw Timeout(what + ": waited " + std::to_string(left.count()) + " ms for every rank to say whether it can " +
                  "split the group's communicator; " + std::to_string(arrived) + " of " + std::to_string(size) +
                  " ranks did (a rank may have died, or not be making this subgroup)");
  }
  return store.add(key + "cannot", 0) == 0;
}

}  // namespace nccl
}  // namespace distcomm
