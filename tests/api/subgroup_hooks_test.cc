// The ABI 1.4 calls from the core to a backend (api/plugin/backend.h): ProcessGroup::abort()
// reaches Backend::abort() rather than shutdown(), and new_group / split ask the parent's
// backend for the subgroup's on every rank of the parent, members or not, in the same order.
// The subgroup_hooks test plugin logs what it is asked in its group's store.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/file_store.h"
#include "api/store/hash_store.h"
#include "api/store/prefix_store.h"
#include "api/process_group.h"
#include "tests/api/plugin_test_env.h"
#include "tests/testing/forwarding_store.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using testing::run_group;

// What the subgroup_hooks backend of `group` logged on `rank`.
std::string log_of(ProcessGroup& world, const std::string& group, int rank) {
  PrefixStore store("pg/" + group + "/cpu/subgroup_hooks", world.store());
  const std::string key = "log/" + std::to_string(rank);
  return store.check({key}) ? to_string(store.get(key)) : "(nothing)";
}

class SubgroupHooksTest : public ::testing::Test {
 protected:
  void SetUp() override { use_test_plugins(); }
};

// A store that keeps the test plugin's logs: a subgroup's last rank to destroy it deletes
// its creation's keys (api/group/creation_keys.h), the backend's log among them, which this
// test reads after the destruction.
class KeepingLogs : public testing::ForwardingStore {
 public:
  explicit KeepingLogs(StorePtr base) : ForwardingStore(base) { timeout_ = base->timeout(); }
  bool delete_key(const std::string& k) override {
    return k.find("/subgroup_hooks/log/") == std::string::npos && ForwardingStore::delete_key(k);
  }
};

TEST_F(SubgroupHooksTest, AbortReachesTheBackendsAbortAndDestructionItsShutdown) {
  const std::string dir = testing::make_temp_dir();
  testing::run_ranks(2, [&](int rank, int size) {
    ProcessGroupOptions o;
    o.store = std::make_shared<KeepingLogs>(std::make_shared<FileStore>(dir + "/store", size));
    o.store->set_timeout(std::chrono::seconds(60));
    o.rank = rank;
    o.size = size;
    o.backend = "subgroup_hooks";
    o.timeout = std::chrono::seconds(60);
    auto world = ProcessGroup::create(o);
    ProcessGroup& pg = *world;
    auto sub = pg.new_group({0, 1});
    pg.abort();
    EXPECT_EQ(log_of(pg, "world", pg.rank()), "created; member of [0,1]; abort");
    sub.reset();
    EXPECT_EQ(log_of(pg, "world/g0", pg.rank()), "derived; shutdown");
  });
  testing::remove_temp_dir(dir);
}

TEST_F(SubgroupHooksTest, NewGroupAsksTheParentOnEveryRankAndMembersGetItsBackend) {
  run_group(3, "subgroup_hooks", [](ProcessGroup& pg) {
    auto sub = pg.new_group({2, 0});
    if (pg.rank() == 1) {
      EXPECT_EQ(sub, nullptr);
      EXPECT_EQ(log_of(pg, "world", 1), "created; left out of [0,2]");
    } else {
      ASSERT_NE(sub, nullptr);
      EXPECT_EQ(log_of(pg, "world", pg.rank()), "created; member of [0,2]");
      EXPECT_EQ(log_of(pg, "world/g0", sub->rank()), "derived");
    }
    pg.exchange().all_gather("checked");  // no rank destroys its group before the others read
  });
}

// A rank whose list is refused, by itself or by its members, makes no group, but is still
// asked as left out: where the parent splits the subgroup (NCCL's ncclCommSplit, which
// waits for every parent rank), the ranks whose lists agree would otherwise wait in the
// split for it until their timeout.
TEST_F(SubgroupHooksTest, NewGroupAsksARankWhoseListIsRefusedAsLeftOut) {
  run_group(3, "subgroup_hooks", [](ProcessGroup& pg) {
    // Rank 2 refuses its own list; ranks 0 and 1 agree on theirs, which leaves 2 out.
    if (pg.rank() == 2) {
      EXPECT_THROW(pg.new_group({0, 1, 5}), InvalidArgument);
    } else {
      ASSERT_NE(pg.new_group({0, 1}), nullptr);
    }
    // Ranks 0 and 1 agree; rank 2 lists itself with them, and its members refuse it.
    if (pg.rank() == 2) {
      EXPECT_THROW(pg.new_group({0, 1, 2}), InvalidArgument);
    } else {
      ASSERT_NE(pg.new_group({0, 1}), nullptr);
    }
    // Every member refused: rank 1 refuses its own list, which 0 and 2 name.
    if (pg.rank() == 1) {
      EXPECT_THROW(pg.new_group({1, 1}), InvalidArgument);
    } else {
      EXPECT_THROW(pg.new_group({0, 1, 2}), InvalidArgument);
    }
    const std::vector<std::string> logs{
        "created; member of [0,1]; member of [0,1]; left out of []",
        "created; member of [0,1]; member of [0,1]; left out of []",
        "created; left out of []; left out of []; left out of []",
    };
    EXPECT_EQ(log_of(pg, "world", pg.rank()), logs[static_cast<size_t>(pg.rank())]);
    pg.exchange().all_gather("checked");
  });
}

TEST_F(SubgroupHooksTest, SplitAsksTheRanksItLeavesOutTooInKeyOrder) {
  run_group(3, "subgroup_hooks", [](ProcessGroup& pg) {
    // Rank 1 is left out; ranks 0 and 2 order themselves by key: 2 first.
    auto sub = pg.split(pg.rank() == 1 ? -1 : 0, -pg.rank());
    if (pg.rank() == 1) {
      EXPECT_EQ(log_of(pg, "world", 1), "created; left out of []");
    } else {
      ASSERT_NE(sub, nullptr);
      EXPECT_EQ(sub->rank(), pg.rank() == 2 ? 0 : 1);
      EXPECT_EQ(log_of(pg, "world", pg.rank()), "created; member of [2,0]");
      EXPECT_EQ(log_of(pg, "world/s0c0", sub->rank()), "derived");
    }
    pg.exchange().all_gather("checked");
  });
}

TEST_F(SubgroupHooksTest, SplitGroupAsksEveryRankWithItsOwnListInListOrder) {
  run_group(4, "subgroup_hooks", [](ProcessGroup& pg) {
    // Rank 2 is in no list; rank 3 is rank 0 of its group.
    auto sub = pg.split_group({{3, 1}, {0}});
    const std::string log = log_of(pg, "world", pg.rank());
    if (pg.rank() == 2) {
      EXPECT_EQ(sub, nullptr);
      EXPECT_EQ(log, "created; left out of []");
    } else {
      ASSERT_NE(sub, nullptr);
      EXPECT_EQ(log, pg.rank() == 0 ? "created; member of [0]" : "created; member of [3,1]");
      if (pg.rank() != 0) {  // subgroup_hooks leaves single-rank subgroups to create()
        EXPECT_EQ(sub->rank(), pg.rank() == 3 ? 0 : 1);
        EXPECT_EQ(log_of(pg, "world/sg0k0", sub->rank()), "derived");
      }
    }
    pg.exchange().all_gather("checked");
  });
}

TEST_F(SubgroupHooksTest, ABackendTheParentDoesNotMakeIsCreatedAsBefore) {
  run_group(2, "subgroup_hooks", [](ProcessGroup& pg) {
    // subgroup_hooks leaves single-rank subgroups to create().
    auto only0 = pg.new_group({0});
    auto only1 = pg.new_group({1});
    auto both = pg.new_group({0, 1});
    EXPECT_EQ(log_of(pg, "world/g" + std::to_string(pg.rank()), 0), "created");
    EXPECT_EQ(log_of(pg, "world/g2", pg.rank()), "derived");
    // Another plugin for the subgroup: the parent is not asked.
    auto elsewhere = pg.new_group({0, 1}, "any_size");
    EXPECT_EQ(log_of(pg, "world", pg.rank()), pg.rank() == 0 ? "created; member of [0]; left out of [1]; member of [0,1]"
                                                              : "created; left out of [0]; member of [1]; member of [0,1]");
    pg.exchange().all_gather("checked");
  });
}

TEST_F(SubgroupHooksTest, APluginOlderThanTheHooksIsNeverAskedAndItsShutdownEndsIt) {
  // abi_1_0 throws from the hooks, which a real 1.0 plugin would not have in its vtable.
  run_group(2, "abi_1_0", [](ProcessGroup& pg) {
    auto sub = pg.new_group({0, 1});
    auto halves = pg.split(pg.rank(), 0);
    ASSERT_NE(sub, nullptr);
    ASSERT_NE(halves, nullptr);
    pg.abort();
    sub->abort();
  });
}

// A mixed group whose CUDA backend refuses to be created fails as a whole; the CPU backend
// made before it is shut down, not just deleted (a backend whose threads end only in
// shutdown() would otherwise be destroyed with them running).
TEST_F(SubgroupHooksTest, ABackendMadeBeforeTheCreationFailedIsShutDown) {
  ProcessGroupOptions o;
  o.store = std::make_shared<HashStore>();
  o.backend = "cpu:subgroup_hooks,cuda:failing_create";
  try {
    ProcessGroup::create(o);
    ADD_FAILURE() << "the group was created";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("refuses to be created"), std::string::npos) << e.what();
  }
  PrefixStore log("pg/world/cpu/subgroup_hooks", o.store);
  ASSERT_TRUE(log.check({"log/0"}));
  EXPECT_EQ(to_string(log.get("log/0")), "created; shutdown");
}

}  // namespace
}  // namespace distcomm
