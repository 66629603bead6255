// new_group's lists, compared before its members meet (ProcessGroup::new_group,
// GroupCreation::arrive).
//
// new_group names its subgroup by the call's number alone ("world/g0"), whatever list a rank
// passed: ranks that passed different lists would meet under one name, and one rank's "rank 1
// of 2" would be another's, so that data went to a peer its sender never listed. So every
// rank of the parent posts its list under the call's key, in the parent's namespace, and a
// member waits there for the lists of its members -- the subgroup's arrival, no extra round
// -- refusing at once, with an InvalidArgument naming who passed what, a member whose list is
// another, or whose backend is (the backend argument as passed).
//
// Members wait for members only, as arrival always has: a rank outside its list posts it and
// returns (members that list it see what it passed), and a member none of whose members
// passed another list cannot learn of a rank outside its list that did; it makes the group
// of its list, with exactly the ranks that asked for it. Ranks whose lists are disjoint make
// disjoint groups of the one name; the first member of each (its leader) numbers its
// creation, as each rank's own count numbers a group's creations elsewhere (arrive), so that
// each group's keys are its own.
//
// A rank that refuses its own list (a rank outside the parent, one listed twice, none) posts
// it there too, with why (refuse): the members it names are refused at once, quoting it,
// rather than waiting out the timeout for a rank that will not come; a rank whose parent it
// aborted posts so too (fail), and its members end with a PeerFailure. And while a member
// waits, it asks the parent (every kCreationFailedCheck) whether a rank it still waits for
// is known gone (raise_if_parent_failed: the parent's failure record, as the parent's host
// exchange asks it), so that a member that died before new_group is named then.
//
// Groups without a store (mpi as init makes it) have nowhere to post: docs/subgroups.md says
// what happens there.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/group/init_wait.h"
#include "api/store/store.h"

namespace distcomm {

class MemberLists {
 public:
  // Asked, while meet waits, with the parent ranks whose lists have not come: throws when
  // they will not (ProcessGroup::raise_if_exchange_cannot_end's contract).
  using RaiseIfFailed = std::function<void(const std::function<std::vector<int>()>& missing)>;

  // call: "new_group #0 on group 'world'", for messages; key_prefix: the call's keys, in
  // the parent's namespace; list: this rank's, sorted, in ranks of the parent, whose rank
  // this rank is (as passed, for refuse); backend: the subgroup's backend text as this rank
  // would make it, compared too: members of one list that passed different ones are refused.
  MemberLists(std::string call, std::string key_prefix, std::vector<int> list, int parent_rank, std::string backend,
              RaiseIfFailed raise_if_parent_failed = {});

  // A rank outside its own list: says what it passed, and goes.
  void post(Store& store) const;
  // A rank that refuses its own list because `why` ("rank 7 is outside [0, 4)"): says what
  // it passed and why, for the members it names, before it throws.
  void refuse(Store& store, const std::string& why) const;
  // A rank that cannot take part because of the state of its parent (`why`: "it aborted
  // group 'world' (ProcessGroup::abort)"): the same post, but the members it names fail with
  // a PeerFailure quoting it (their arguments were right; that rank will not come).
  void fail(Store& store, const std::string& why) const;
  // A member (group rank `rank` in the list) whose group's keys are under `base`
  // ("pg/world/g0"): posts its list, waits within w for its members' (the group's
  // arrival, reported as arrival is) and returns the creation's number, its leader's
  // count of creations under base (1: the first; n: the group's keys are under base@n).
  // Throws InvalidArgument as soon as a member's list is seen to differ or to be refused,
  // PeerFailure once a member said it cannot take part (fail), and what
  // raise_if_parent_failed throws for a member that will not come.
  int64_t meet(Store& store, const std::string& base, int rank, const InitWait& w, const std::string& store_text) const;

 private:
  std::string key(int parent_rank) const;
  void post(Store& store, int64_t number, const std::string& refusal = "") const;
  // Throws when a posted list (values[i] of list_[i], "" where not posted) differs.
  void check(const std::vector<std::string>& values) const;

  std::string call_;
  std::string key_prefix_;
  std::vector<int> list_;
  int parent_rank_;
  std::string backend_;
  RaiseIfFailed raise_if_parent_failed_;
};

}  // namespace distcomm
