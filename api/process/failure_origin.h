// Whether this process's latest group failure was its own or another rank's that it adopted
// (api/diagnostics/group_failure.h: the error it throws names that rank's failure as the
// cause). GroupFailure notes it; run_main and spawn() write it into the rank's FailureReport
// (consequence), so that the launcher and spawn name that other rank. Here, not in
// diagnostics/, because process/ (spawn) reads it and includes nothing above itself.
#pragma once

namespace distcomm {

// lost_world_rank: the world rank whose loss (death, closed connections) the failure is,
// when it is one and that rank is known; else -1 (FailureReport::lost_rank).
void note_group_failure_origin(bool adopted, int lost_world_rank = -1);
// The latest, not the first: a program that survived one failure (ft/) ends by another.
// False when it was this rank's own, or none was recorded.
bool latest_group_failure_was_adopted();
// The latest failure's lost world rank; -1 when it was not a loss, or none was recorded.
int latest_group_failure_lost_rank();

// While one lives on a thread, the groups created there number their ranks otherwise than
// the job does (ft's generations, compacted after a loss; any group not made under
// init_process_group's world): a loss in them names no job rank (lost_rank -1), or the
// launcher would match a generation's rank with another process of the job.
class GroupsWithRanksOfTheirOwn {
 public:
  GroupsWithRanksOfTheirOwn();
  ~GroupsWithRanksOfTheirOwn();
  GroupsWithRanksOfTheirOwn(const GroupsWithRanksOfTheirOwn&) = delete;
  GroupsWithRanksOfTheirOwn& operator=(const GroupsWithRanksOfTheirOwn&) = delete;
};
// Whether a GroupsWithRanksOfTheirOwn lives on this thread.
bool creating_groups_with_ranks_of_their_own();

}  // namespace distcomm
