// A group's creation, every step of it between the checks of its options and a group ready
// for ops (ProcessGroup::create, init_process_group, new_group and split run it):
//   1. arrival: every rank arrives on the store (the group's keys get their prefix here), so
//      that a rank that never came is named before any backend waits for it;
//   2. the backends: one per device type of the spec, each made by its plugin (or by the
//      parent group's backend, for a subgroup that can reuse it) within what is left of the
//      creation's one deadline, which the plugin's rendezvous takes through
//      BackendCreationScope (init_wait.h); "auto" chooses here, through the host exchange;
//   3. confirmation: each rank says whether its part worked, so that no rank returns while
//      another is still failing it, and every rank reports the first failure.
#pragma once

#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/group/backend_spec.h"
#include "api/group/group_backends.h"
#include "api/group/host_exchange.h"
#include "api/group/init_wait.h"
#include "api/group/member_lists.h"
#include "api/group/process_group_options.h"

namespace distcomm {

class RecordingPrefixStore;

class GroupCreation {
 public:
  // options: the group's, checked (environment set, global ranks filled); spec: its backend
  // spec, parsed once. The deadline counts from options.creation_deadline, or from now.
  // lists: new_group's (member_lists.h), whose meeting is then the arrival; null otherwise.
  GroupCreation(const ProcessGroupOptions& options, BackendSpec spec, const MemberLists* lists = nullptr);

  // Step 1 (groups with a store). The group's prefix in the store ("pg/world/", or
  // "pg/world@2/" for the second group of that name over the same store) is chosen first,
  // before the wait: a rank whose arrival times out confirms that failure under it. (For
  // new_group, the prefix is the leader's, known once every member has come: a member
  // refused or timed out in that meeting confirms nothing, and its members, in the same
  // wait, end on their own.) Before it, the rank claims its number (claim_rank): a second
  // process arriving as the same rank is refused with an InvalidArgument naming both.
  void arrive();
  // Step 2. parent: for a subgroup, its parent's backends (those it can reuse are asked
  // first, reusable_backends), with members, its ranks in the parent; exchange: the
  // group's, for "auto" (null: none yet).
  GroupBackends make_backends(const GroupBackends* parent, const std::vector<int>& members, HostExchange* exchange);
  // Step 3 (once arrived): says whether this rank's part worked (failure null) and waits for
  // the others'; throws the first failure of any rank.
  void confirm(const std::exception_ptr& failure);
  // A creation's failure as it is, unless it is the store's: then a PeerFailure naming the
  // process that served the store (options.store_host: rank 0, or the launcher), which has
  // gone.
  std::exception_ptr with_store_host(const std::exception_ptr& failure) const;

  // As given, and once "auto" has chosen, "auto (cpu: shm)".
  const BackendSpec& spec() const { return spec_; }
  // Empty until arrival has chosen it.
  const std::string& store_prefix() const { return store_prefix_; }
  // The creation's one deadline and failure key (an EnclosingCreationScope for the groups
  // made during it).
  const InitWait& wait() const { return wait_; }
  // Whether "auto" or "hier" chose the hierarchy (hierarchical_backend.h): the CPU backend
  // made is its flat one (across_backend()), and the group builds its levels from
  // placements() before confirm, so that a level's failure is the creation's.
  bool hierarchical() const { return hierarchical_; }
  // The hierarchy's backend across hosts, which is also its flat one: "gloo" or "mpi"
  // (choose_across_backend); empty where the group is not hierarchical.
  const std::string& across_backend() const { return across_backend_; }
  // Every rank's placement (auto_backend_placement), where "auto" or "hier" exchanged them.
  const std::vector<std::string>& placements() const { return placements_; }
  // Whether new_group's meeting refused this rank's list (InvalidArgument from meet): it
  // then made no backend, and the parent's backends must still hear of the subgroup as
  // left out of it (skip_subgroup), as a split over the parent (NCCL) waits for every rank.
  bool list_refused() const { return list_refused_; }
  // The stores given to the backends made (make_backends), which remember the keys each
  // wrote, for their deletion at the group's end (creation_keys.h).
  const std::vector<std::shared_ptr<RecordingPrefixStore>>& backend_stores() const { return backend_stores_; }

 private:
  // Counts this creation of the group's name on this rank (made_by) and claims the rank:
  // returns the count, the n-th creation of every rank being the same group.
  int64_t count_creation(Store& store, const std::string& base);
  // Claims this rank of the group for this process, in creation n (not new_group's: its
  // ranks come from a parent that claimed them), under "<base>/process/<rank>". A claim
  // held by another process whose creation is still in its arrival (no rank said it
  // failed, not every rank has come) is the same rank started twice: an InvalidArgument
  // naming both processes ("host:pid"), said first where both creations' ranks wait
  // (kCreationFailedKey), so that they end within a look too. A claim of this process's, or
  // one whose creation is over (a new job over the same store), is taken. One store call
  // more per creation; the others only where the claim is another process's.
  // A claim taken from another process of this host that still runs, after every rank of
  // its creation arrived, is named in a warning and in the arrival's Timeout
  // (duplicate_hint_).
  void claim_rank(Store& store, const std::string& base, int64_t n);
  // After the arrivals: InvalidArgument when rank 0 asked for another backend than this rank.
  void check_same_backend_as_rank_0(Store& store) const;

  const ProcessGroupOptions& options_;
  BackendSpec spec_;
  const MemberLists* lists_;
  std::string where_;  // "rank 1/4 group 'world'"
  InitWait wait_;
  std::string store_prefix_;
  bool list_refused_ = false;
  std::string duplicate_hint_;  // claim_rank's: this may be a second process of its rank
  std::vector<std::string> placements_;
  bool hierarchical_ = false;
  std::string across_backend_;
  std::vector<std::shared_ptr<RecordingPrefixStore>> backend_stores_;
};

// The parent group's backends that a subgroup with backend spec `spec` would use again (the
// same plugin for the same device type, of ABI minor 4 or later): each is asked for the
// subgroup's backend (Backend::create_subgroup_backend), on every rank of the parent.
std::map<DeviceType, Backend*> reusable_backends(const GroupBackends& parent, const BackendSpec& spec,
                                                 const PluginSearch& plugins);
// On a rank the subgroup leaves out: gives each of those backends its part.
void skip_subgroup(const GroupBackends& parent, const BackendSpec& spec, const std::vector<int>& members,
                   const PluginSearch& plugins);

}  // namespace distcomm
