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

namespace {

// What a rank that cannot take part adds on top of its arrival: the count of ranks that
// cannot sits in the high half, the count of arrivals in the low one.
constexpr int64_t kCannot = int64_t{1} << 32;

std::string vote_key(const std::string& prefix, uint64_t index, const char* what) {
  return prefix + "subgroup" + std::to_string(index) + "/" + what;
}

}  // namespace

bool every_rank_can_split(Store& store, const std::string& prefix, uint64_t index, int size, bool can,
                          std::chrono::steady_clock::time_point deadline, const std::string& what) {
  if (size <= 1) return can;
  const std::string votes = vote_key(prefix, index, "votes"), answer = vote_key(prefix, index, "answer");
  const int64_t counted = store.add(votes, can ? 1 : 1 + kCannot);
  if (counted % kCannot == size) {
    const bool all_can = counted / kCannot == 0;
    store.set(answer, std::string(all_can ? "1" : "0"));
    store.delete_key(votes);
    if (index > 0) store.delete_key(vote_key(prefix, index - 1, "answer"));
    return can && all_can;
  }
  if (!can) return false;
  const auto start = std::chrono::steady_clock::now();
  // At least 1 ms: a store reads a timeout of zero or less as "the store's default".
  const auto left = std::max(std::chrono::milliseconds(1),
                             std::chrono::duration_cast<std::chrono::milliseconds>(deadline - start));
  try {
    store.wait({answer}, left);
  } catch (const Timeout&) {
    const int64_t arrived = store.add(votes, 0) % kCannot;
    throw Timeout(what + ": waited " + std::to_string(left.count()) + " ms for every rank to say whether it can " +
                  "split the group's communicator; " + std::to_string(arrived) + " of " + std::to_string(size) +
                  " ranks did (a rank may have died, or not be making this subgroup)");
  }
  const Store::Bytes said = store.get(answer);
  return said.size() == 1 && said[0] == '1';
}

}  // namespace nccl
}  // namespace distcomm
