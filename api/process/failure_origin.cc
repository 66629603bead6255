#include "api/process/failure_origin.h"

#include <atomic>
#include <cstdint>

namespace distcomm {
namespace {

// One word, so that the two are read as they were noted together.
std::atomic<int64_t> g_latest_failure{0};  // bit 32: adopted; low 32 bits: lost rank + 1

thread_local int t_groups_with_ranks_of_their_own = 0;

}  // namespace

GroupsWithRanksOfTheirOwn::GroupsWithRanksOfTheirOwn() { ++t_groups_with_ranks_of_their_own; }
GroupsWithRanksOfTheirOwn::~GroupsWithRanksOfTheirOwn() { --t_groups_with_ranks_of_their_own; }
bool creating_groups_with_ranks_of_their_own() { return t_groups_with_ranks_of_their_own > 0; }

void note_group_failure_origin(bool adopted, int lost_world_rank) {
  const int64_t lost = lost_world_rank >= 0 ? static_cast<int64_t>(lost_world_rank) + 1 : 0;
  g_latest_failure.store((adopted ? int64_t{1} << 32 : 0) | lost);
}

bool latest_group_failure_was_adopted() { return (g_latest_failure.load() >> 32) & 1; }

int latest_group_failure_lost_rank() { return static_cast<int>(g_latest_failure.load() & 0xffffffff) - 1; }

}  // namespace distcomm
