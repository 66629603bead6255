#include "api/group/creation_keys.h"

#include <atomic>
#include <optional>
#include <sstream>

#include "api/errors.h"
#include "api/group/init_wait.h"
#include "api/store/internal/call_deadline.h"

namespace distcomm {
namespace {

// The store a release found gone (or too slow to answer within kReleaseBound): this process
// asks it no more, so that the groups still to be destroyed (a job's end, where the process
// serving the store may have left) each cost nothing. Compared by address only.
std::atomic<const Store*> store_given_up{nullptr};

// Runs fn with every store call of this thread bounded; swallows every failure, and gives
// the store up where its server did not answer (or the connection failed). Not where the
// call only waited behind another thread's request on the shared connection (a long wait of
// a thread in new_group, a creation): the server may be fine, and giving it up would leave
// every later group's keys in it for good (helper-104).
template <typename Fn>
void quietly(Store& store, const std::string& what, Fn&& fn) noexcept {
  if (store_given_up.load(std::memory_order_relaxed) == &store) return;
  try {
    internal::StoreCallDeadline bound(std::chrono::steady_clock::now() + kReleaseBound, what);
    fn();
  } catch (const internal::StoreCallCutShort& e) {
    if (e.where() != internal::StoreCallCutShort::kBehindAnotherRequest) {
      store_given_up.store(&store, std::memory_order_relaxed);
    }
  } catch (...) {
    store_given_up.store(&store, std::memory_order_relaxed);
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

}  // namespace

void RecordingPrefixStore::note(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  keys_.insert(key);
}

void RecordingPrefixStore::set(const std::string& key, const Bytes& value) {
  note(key);
  PrefixStore::set(key, value);
}

int64_t RecordingPrefixStore::add(const std::string& key, int64_t delta) {
  note(key);
  return PrefixStore::add(key, delta);
}

Store::Bytes RecordingPrefixStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  note(key);
  return PrefixStore::compare_set(key, expected, desired);
}

bool RecordingPrefixStore::delete_key(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys_.erase(key);
  }
  return PrefixStore::delete_key(key);
}

std::vector<std::string> RecordingPrefixStore::written() const {
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys.assign(keys_.begin(), keys_.end());
  }
  return prefixed(keys);
}

void release_creation_keys(const CreationKeys& keys) noexcept {
  if (!keys.store || keys.prefix.empty()) return;
  Store& store = *keys.store;
  quietly(store, "the release of the keys of " + keys.prefix, [&] {
    const std::string count_key = keys.prefix + "ended";
    auto list_key = [&](int r) { return keys.prefix + "ended/" + std::to_string(r); };
    std::string mine;
    for (const auto& backend : keys.backend_stores) {
      for (const std::string& k : backend->written()) mine += k + "\n";
    }
    if (keys.size > 1) store.set(list_key(keys.rank), mine);
    // Each rank posts its list before it counts itself: the rank that counts last finds
    // every list, and every other rank has stopped reading (and writing) the group's keys.
    if (keys.size > 1 && store.add(count_key, 1) != keys.size) return;
    std::set<std::string> doomed(keys.more.begin(), keys.more.end());
    for (const std::string& k : lines_of(mine)) doomed.insert(k);
    if (keys.size > 1) {
      std::vector<std::string> lists;
      for (int r = 0; r < keys.size; ++r) lists.push_back(list_key(r));
      for (const std::optional<Store::Bytes>& v : read_present(store, lists)) {
        if (!v) continue;
        for (const std::string& k : lines_of(to_string(*v))) doomed.insert(k);
      }
      for (const std::string& k : lists) doomed.insert(k);
      doomed.insert(count_key);
    }
    doomed.insert(keys.prefix + kCreationFailedKey);
    for (int r = 0; r < keys.size; ++r) {
      const std::string n = std::to_string(r);
      doomed.insert(keys.prefix + "arrived/" + n);
      doomed.insert(keys.prefix + "created/" + n);
      if (!keys.name_base.empty()) {
        doomed.insert(keys.name_base + "/made_by/" + n);
        doomed.insert(keys.name_base + "/process/" + n);
      }
    }
    for (const std::string& k : doomed) store.delete_key(k);
  });
}

void release_new_group_call(const StorePtr& store, const std::string& key_prefix, int parent_size,
                            const std::string& subgroup_base) noexcept {
  if (!store) return;
  quietly(*store, "the release of the keys of " + key_prefix, [&] {
    // Every rank of the parent counts itself once its call is over (its list read by the
    // members that wait for it, its own meeting ended): the last one deletes the lists.
    if (store->add(key_prefix + "done", 1) != parent_size) return;
    for (int r = 0; r < parent_size; ++r) store->delete_key(key_prefix + std::to_string(r));
    // The leaders of every list counted the subgroup's creations there before they posted.
    store->delete_key(subgroup_base + "/made_by/0");
    store->delete_key(key_prefix + "done");
  });
}

}  // namespace distcomm
