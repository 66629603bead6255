// A group's creation keys, and their deletion once no rank reads them (ARCHITECTURE.md,
// "Creating a group").
//
// Every creation works under keys of its own ("pg/<g>@<n>/": arrivals, confirmations, the
// host exchange's, each backend's rendezvous, stall-watch and failure-board keys), so that
// nothing an earlier group left is read as this one's. A group made from a parent (split,
// split_group, new_group, a hierarchy's levels, shrink) is made and destroyed many times in
// a long job: without deletion its keys stayed in the store for good (17 keys, 3.3 KB of the
// store server's memory per subgroup of 3 ranks over shm).
//
// So each rank of such a group, when the group is destroyed (its backends gone: no thread of
// it writes again), says which keys it wrote through its backends' stores (a
// RecordingPrefixStore each) under "<prefix>ended/<rank>" and counts itself in
// "<prefix>ended"; the rank that brings the count to the group's size is the last one that
// could read any of them, and deletes them all: every rank's list, the core's own keys of the
// creation (arrived/<r>, created/<r>, creation_failed, the host exchange's last keys, the
// failure boards), the count, and, where the group's name can never be made again (every
// name a parent gives but new_group's), the name's creation count and rank claims
// ("pg/<g>/made_by/<r>", "pg/<g>/process/<r>"). new_group's own keys in the parent's
// namespace ("new_group/<id>/<r>", which every rank of the parent posts, and the count of
// the subgroup's creations, which the leaders of disjoint lists share) go once every rank of
// the parent has ended that call (release_new_group_call).
//
// Deletion never fails its caller: every call is bounded (kReleaseBound, through the
// thread's call deadline), any error ends it quietly, and a store that did not answer once
// is not asked again by this process (at a job's end, the process serving it may be gone).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "api/store/prefix_store.h"

namespace distcomm {

// A PrefixStore that remembers the keys written through it (set, add, compare_set), less
// those deleted through it: a backend's keys, whatever its plugin names them. Thread-safe.
class RecordingPrefixStore : public PrefixStore {
 public:
  using PrefixStore::PrefixStore;

  using Store::set;
  void set(const std::string& key, const Bytes& value) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool delete_key(const std::string& key) override;

  // The keys written, as the base store holds them.
  std::vector<std::string> written() const;

 private:
  void note(const std::string& key);

  mutable std::mutex mu_;
  std::set<std::string> keys_;
};

// What a rank knows of its group's creation keys, to release them when the group ends.
struct CreationKeys {
  StorePtr store;      // the world's
  std::string prefix;  // the creation's: "pg/world/s0c0/" (GroupCreation::store_prefix)
  // The name's keys ("pg/world/s0c0"): its creation count and rank claims, deleted too;
  // empty where the name may be made again (a top-level group's, new_group's).
  std::string name_base;
  int rank = 0;
  int size = 1;
  std::vector<std::shared_ptr<RecordingPrefixStore>> backend_stores;
  // More keys, known to the core, that may be left (as the base store holds them).
  std::vector<std::string> more;
};

// Each rank's whole bound for releasing one group's keys.
inline constexpr std::chrono::milliseconds kReleaseBound{1000};

// Called once per rank as its group is destroyed (after its backends are): counts this rank
// out, and the last rank deletes the creation's keys. Never throws.
void release_creation_keys(const CreationKeys& keys) noexcept;

// Called once per rank of the parent as its new_group call `key_prefix` ("pg/world/new_group/3/")
// ends, whatever its outcome; the last of the parent's `parent_size` ranks deletes the call's
// lists and the subgroup name's creation count (`subgroup_base`: "pg/world/g3"). Never throws.
void release_new_group_call(const StorePtr& store, const std::string& key_prefix, int parent_size,
                            const std::string& subgroup_base) noexcept;

}  // namespace distcomm
