// What a hierarchical group's levels show, carried up to the group itself (`trace analyze`).
//
// A group by hosts ("hier", and "auto" across hosts) runs its ops on levels of its own:
// 'G/hier_host<N>' (shm, the ranks of host N) and 'G/hier_local<L>' (gloo, local rank L of
// every host). When a host froze or was cut off, only the levels saw who was missing (the
// group itself reads "failed in it: ranks [0-15]", every rank's op ended by the group's
// timeout), and they say so in their own numbering ("behind: rank 2" in each
// 'world/hier_local<L>'). The group's section then gets the culprits in its own ranks,
// with the host they make up and the levels that saw them.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace distcomm {
namespace trace {

// One group's standing, as its section of the report worked it out, in its own ranks.
struct GroupVerdict {
  std::vector<int64_t> global_ranks;  // by group rank
  bool stuck = false;                 // a collective not every rank completed
  std::string what;                   // that collective ("all_reduce #32 float32[8] sum")
  std::set<int> behind;               // ranks named behind in it (never issued it, issued it late)
  std::set<int> silent;               // ranks the others' errors say did not report in it
  // Ranks of the group left no dump (died, or their host is gone): those are the cause the
  // section names, and ranks late in the levels are held up by them (nothing carried up).
  bool ranks_missing = false;
};

// The ranks an error names as not having reported ("rank 2 did not report", "ranks [8, 9,
// 10, 11] did not report", "ranks [0-3, 7] ..."), in the numbering of the error's group.
std::set<int> silent_ranks_in(const std::string& error);

// Lines (each "    ...\n") for group `name`'s section: what its levels (the groups named
// name + "/hier_host<N>" and name + "/hier_local<L>") show of ranks behind or silent, in
// the group's ranks; "" when it is not stuck or its levels name nobody. Also the group's
// own silent ranks, which its section does not list otherwise.
std::string levels_summary(const std::string& name, const std::map<std::string, GroupVerdict>& verdicts);

}  // namespace trace
}  // namespace distcomm
