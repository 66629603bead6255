// ft::waiting_joiners with its cursor: a step's commit reads only the joiners that may still
// wait, not every one the job ever had. Without the cursor, each step's last committer read
// all of them (a check, a get and a liveness look each) on the step's critical path, so a
// long job's steps grew slower with every replacement it had made.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/store/hash_store.h"
#include "ft/generation.h"
#include "ft/liveness.h"
#include "ft/store_keys.h"
#include "tests/testing/forwarding_store.h"

namespace distcomm {
namespace ft {
namespace {

// Counts the calls that reach the store (each one a round trip on a TCPStore).
class CountingStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  using Store::set;
  void set(const std::string& key, const Bytes& value) override { ++calls; ForwardingStore::set(key, value); }
  Bytes get(const std::string& key) override { ++calls; return ForwardingStore::get(key); }
  int64_t add(const std::string& key, int64_t delta) override { ++calls; return ForwardingStore::add(key, delta); }
  bool check(const std::vector<std::string>& keys) override { ++calls; return ForwardingStore::check(keys); }
  int64_t calls = 0;
};

void register_joiner(Store& store, const std::string& id) {
  const int64_t n = store.add(keys::kJoiners, 1);
  store.set(keys::joiner(n), id);
}

TEST(WaitingJoiners, AStepReadsOnlyTheJoinersThatMayStillWait) {
  auto store = std::make_shared<CountingStore>(std::make_shared<HashStore>());
  Liveness liveness(store, std::chrono::milliseconds(1000));
  // 40 replacements over a long job: 38 died again, one became a member, one waits.
  for (int k = 1; k <= 40; ++k) register_joiner(*store, "j" + std::to_string(k));
  for (int k = 1; k <= 38; ++k) store->set(keys::dead("j" + std::to_string(k)), "killed");
  const std::vector<std::string> current = {"rank0", "rank1", "j39"};

  int64_t cursor = 1;
  store->calls = 0;
  EXPECT_EQ(waiting_joiners(*store, liveness, current, &cursor), std::vector<std::string>{"j40"});
  const int64_t first = store->calls;
  EXPECT_EQ(cursor, 40) << "joiners 1-39 are resolved (gone, or a member), 40 still waits";

  // The next step: the add of the count and joiner 40's reads, not the 39 resolved ones.
  store->calls = 0;
  EXPECT_EQ(waiting_joiners(*store, liveness, current, &cursor), std::vector<std::string>{"j40"});
  EXPECT_LE(store->calls, 6) << "the first call made " << first;
  EXPECT_GE(first, 39 * 2) << "the first call reads every joiner";

  // A joiner counted but not yet written holds the cursor there; one that waits behind a
  // resolved one does not move it past itself.
  store->add(keys::kJoiners, 1);  // joiner 41: counted, not written yet
  store->set(keys::dead("j40"), "killed");
  EXPECT_TRUE(waiting_joiners(*store, liveness, current, &cursor).empty());
  EXPECT_EQ(cursor, 41);
  store->set(keys::joiner(41), "j41");
  EXPECT_EQ(waiting_joiners(*store, liveness, current, &cursor), std::vector<std::string>{"j41"});
  EXPECT_EQ(cursor, 41);

  // Without a cursor (forming a generation), every joiner is read, as before.
  store->calls = 0;
  EXPECT_EQ(waiting_joiners(*store, liveness, current), std::vector<std::string>{"j41"});
  EXPECT_GE(store->calls, 41 * 2);
}

}  // namespace
}  // namespace ft
}  // namespace distcomm
