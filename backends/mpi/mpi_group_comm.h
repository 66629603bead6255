// A group's MPI communicator, created within the group's creation deadline, naming the
// members it waits for.
//
// MPI_Comm_dup and MPI_Comm_create_group block until every member calls them, with no
// timeout and no word on who is missing. So creation goes in two steps:
//   1. Arrival. Every member posts a zero-byte receive from every other member and sends
//      each a zero-byte message, on the runtime's arrival communicator (a duplicate of
//      MPI_COMM_WORLD: the program's own traffic never matches them), with a tag derived
//      from the group's name. The receives are tested in slices inside InitWait::until:
//      every report interval it names the members whose message has not come, and at the
//      deadline the receives are cancelled (nothing stays posted) and the Timeout names them.
//   2. The blocking call, once every member has arrived. It ends at once unless a member
//      gave up in the same instant (its deadline passed while the others' messages were on
//      the way) or died since: so it too is waited for within the deadline
//      (Runtime::run_setup_within), and at the deadline it is left inside MPI and the process
//      ends at exit without MPI_Finalize, saying so.
// A member that gave up has sent its messages all the same. A late member that then creates
// a group of the same name counts it arrived, waits for it in step 2 and gets a Timeout at
// its own deadline; a member that retries creating the same group meets the late one.
//
// Each member sends and receives (size - 1) zero-byte messages: at 64 ranks, 126 requests
// per member, all posted at once. A group of one rank has nobody to wait for.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "api/group/init_wait.h"
#include "backends/mpi/mpi_runtime.h"

namespace distcomm {
namespace mpi {

struct GroupCommSpec {
  std::string group_name;
  std::vector<int> world_ranks;  // the members' MPI_COMM_WORLD ranks, in group order
  int rank = 0;                  // this process's rank in the group
  // A subgroup's (new_group, split): whether its parent group was shut down (abort or
  // destruction) on this rank, and the parent's name. The arrival step then ends at once:
  // nothing of the parent will take part, and without a store the member that never comes
  // cannot say so. The blocking call of step 2 cannot be left that way (MPI cannot cancel
  // it), but it starts only once every member has arrived.
  std::function<bool()> parent_shut_down;
  std::string parent_name;
};

// Whether a group's world ranks are the whole MPI world in MPI's order (its communicator
// is then a duplicate of MPI_COMM_WORLD; a reordered one, from split, needs its own).
bool is_world_in_order(const std::vector<int>& world_ranks, int world_size);

// The group's communicator (errors returned, not fatal), after every member arrived, all
// within `wait`. Throws Timeout naming the group ranks that did not arrive, or, past
// arrival, naming none; an MPI error as error_from() makes it.
MPI_Comm create_group_comm(Runtime& runtime, const GroupCommSpec& spec, const InitWait& wait);

}  // namespace mpi
}  // namespace distcomm
