// new_group's lists, compared before its members meet (ProcessGroup::new_group,
// GroupCreation::arrive).
//
// new_group names its subgroup by the call's number alone ("world/g0"), whatever list a rank
// passed: ranks that passed different lists would meet under one name, and one rank's "rank 1
// of 2" would be another's, so that data went to a peer its sender never listed. So every
// rank of the parent posts its list under the call's key, in the parent's namespace, and a
// member waits there for the lists of its members -- the subgroup's arrival, no extra round
// -- refusing at once, with an InvalidArgument naming who passed what, a member whose list is
// another.
//
// Members wait for members only, as arrival always has: a rank outside its list posts it and
// returns (members that list it see what it passed), and a member none of whose members
// passed another list cannot learn of a rank outside its list that did; it makes the group
// of its list, with exactly the ranks that asked for it. Ranks whose lists are disjoint make
// disjoint groups of the one name; the first member of each (its leader) numbers its
// creation, as each rank's own count numbers a group's creations elsewhere (arrive), so that
// each group's keys are its own.
//
// Groups without a store (mpi as init makes it) have nowhere to post: docs/subgroups.md says
// what happens there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/group/init_wait.h"
#include "api/store/store.h"

namespace distcomm {

class MemberLists {
 public:
  // call: "new_group #0 on group 'world'", for messages; key_prefix: the call's keys, in
  // the parent's namespace; list: this rank's, sorted, in ranks of the parent, whose rank
  // this rank is.
  MemberLists(std::string call, std::string key_prefix, std::vector<int> list, int parent_rank);

  // A rank outside its own list: says what it passed, and goes.
  void post(Store& store) const;
  // A member (group rank `rank` in the list) whose group's keys are under `base`
  // ("pg/world/g0"): posts its list, waits within w for its members' (the group's
  // arrival, reported as arrival is) and returns the creation's number, its leader's
  // count of creations under base (1: the first; n: the group's keys are under base@n).
  // Throws InvalidArgument as soon as a member's list is seen to differ.
  int64_t meet(Store& store, const std::string& base, int rank, const InitWait& w, const std::string& store_text) const;

 private:
  std::string key(int parent_rank) const;
  void post(Store& store, int64_t number) const;
  // Throws when a posted list (values[i] of list_[i], "" where not posted) differs.
  void check(const std::vector<std::string>& values) const;

  std::string call_;
  std::string key_prefix_;
  std::vector<int> list_;
  int parent_rank_;
};

}  // namespace distcomm
