// The shm backend beyond the conformance suite: backend "auto", groups running at once
// (also with overlapping members), ops nobody waits on, settings that must agree, and
// groups that leave nothing mapped or open behind them.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/backends/shm/shm_test_tensors.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using testing::expect_all;
using testing::filled;
using testing::GroupHarnessOptions;
using testing::run_group;

int open_descriptors() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

int mapped_shm_segments() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("memfd:distcomm-shm-") != std::string::npos;
  return n;
}

TEST(ShmBackend, AutoChoosesShmForRanksOfOneHost) {
  run_group(3, "auto", [](ProcessGroup& pg) {
    EXPECT_EQ(pg.backend_name(), "auto (cpu: shm)");
    EXPECT_EQ(pg.backend_for(DeviceType::kCPU).name(), "shm");
    Tensor t = filled(1000, 1.0f);
    pg.all_reduce(t)->wait();
    expect_all(t, 3.0, "all_reduce over auto");
    ProcessGroupPtr sub = pg.new_group({0, 2});  // a subgroup decides for itself
    if (sub) {
      EXPECT_EQ(sub->backend_for(DeviceType::kCPU).name(), "shm");
    }
  });
}

// A collective's tensors stay allocated while it runs, also when the caller drops its only
// reference right after issuing it: the engine holds them (CollectiveTask::hold; an op that
// ends within the issuing call needs no hold, and gets none), and lets them go when the op
// ends. Rank 0's tensor has an owner that notes its release; rank 0 drops the tensor while
// its all_reduce waits for rank 1, which issues its own only once rank 0 has looked.
TEST(ShmBackend, AnOpHoldsTheTensorsItsCallerDropped) {
  run_group(2, "shm", [](ProcessGroup& world) {
    ProcessGroupPtr other = world.new_group({0, 1});  // tells rank 1 when to issue
    Tensor go = filled(1, 0.0f);
    if (world.rank() == 0) {
      std::vector<float> memory(2, 1.0f);
      std::atomic<bool> released{false};
      WorkPtr op;
      {
        std::shared_ptr<void> owner(memory.data(), [&released](void*) { released = true; });
        Tensor dropped = Tensor::from_blob(memory.data(), {2}, DType::kFloat32, Device::cpu(), std::move(owner));
        op = world.all_reduce(dropped);
      }
      EXPECT_FALSE(op->is_completed());
      EXPECT_FALSE(released.load()) << "the tensor's owner was released while its all_reduce was in flight";
      other->send(go, 1)->wait();
      op->wait();
      EXPECT_TRUE(released.load()) << "the all_reduce ended and still holds its tensor";
      EXPECT_EQ(memory[0], 2.0f);
      EXPECT_EQ(memory[1], 2.0f);
    } else {
      other->recv(go, 0)->wait();
      Tensor t = filled(2, 1.0f);
      world.all_reduce(t)->wait();
      expect_all(t, 2.0, "rank 1's all_reduce");
    }
  });
}

// Each group runs in its own order on each rank: rank 0 waits on the world group's op
// while rank 1 first waits on the other group's. Both finish only if every group
// progresses on its own (a rank's waiting thread drives one group, the other group's
// progress thread the other).
TEST(ShmBackend, TwoGroupsAtOnceInOppositeOrders) {
  run_group(2, "shm", [](ProcessGroup& world) {
    ProcessGroupPtr other = world.new_group({0, 1});
    constexpr int64_t kCount = 3 << 20;  // many rounds each
    Tensor a = filled(kCount, 1.0f), b = filled(kCount, 2.0f);
    if (world.rank() == 0) {
      WorkPtr wa = world.all_reduce(a);
      WorkPtr wb = other->all_reduce(b);
      wa->wait();
      wb->wait();
    } else {
      WorkPtr wb = other->all_reduce(b);
      WorkPtr wa = world.all_reduce(a);
      wb->wait();
      wa->wait();
    }
    expect_all(a, 2.0, "the world group's all_reduce");
    expect_all(b, 4.0, "the other group's all_reduce");
  });
}

TEST(ShmBackend, OverlappingSubgroupsRunTogether) {
  run_group(3, "shm", [](ProcessGroup& world) {
    ProcessGroupPtr left = world.new_group({0, 1});
    ProcessGroupPtr right = world.new_group({1, 2});
    constexpr int64_t kCount = 1 << 20;
    Tensor l = filled(kCount, 1.0f + world.rank()), r = filled(kCount, 10.0f * world.rank());
    std::vector<WorkPtr> works;
    for (int i = 0; i < 3; ++i) {
      if (left) works.push_back(left->all_reduce(l));
      if (right) works.push_back(right->all_reduce(r));
    }
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
    if (left) expect_all(l, 3.0 * 4, "left group, three all_reduces of 1 + 2");  // 3 -> 6 -> 12
    if (right) expect_all(r, 30.0 * 4, "right group, three all_reduces of 10 + 20");
  });
}

// Rank 0 leaves its all_reduce unwaited and blocks in a receive that rank 1 sends only after
// its own all_reduce is through: rank 0's group must progress without rank 0 waiting on it.
TEST(ShmBackend, AnOpNobodyWaitsOnStillProgresses) {
  run_group(2, "shm", [](ProcessGroup& pg) {
    Tensor t = filled(1 << 20, 1.0f);
    Tensor msg = filled(10, 0.0f);
    if (pg.rank() == 0) {
      WorkPtr unwaited = pg.all_reduce(t);
      pg.recv(msg, 1)->wait();
      EXPECT_TRUE(unwaited->is_completed());
      expect_all(msg, 7.0, "the message sent after the all_reduce");
    } else {
      pg.all_reduce(t)->wait();
      Tensor seven = filled(10, 7.0f);
      pg.send(seven, 0)->wait();
    }
    // And an op only polled with is_completed() ends too.
    Tensor u = filled(100, 1.0f);
    WorkPtr w = pg.all_reduce(u);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!w->is_completed() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    ASSERT_TRUE(w->is_completed());
    expect_all(u, 2.0, "a polled all_reduce");
  });
}

// Rounds of at most 56 bytes travel through the inline lines, larger ones through the
// slots; many of both in flight, with two of each (the lines and slots are reused every
// other round), every op's values its own, so that a reader that takes a line or slot
// before its round is written there reads another op's values.
TEST(ShmBackend, InlineAndSlotRoundsInterleaveInFlight) {
  GroupHarnessOptions options;
  options.backend_config = {{"shm_slots", "2"}};
  run_group(3, "shm", [](ProcessGroup& pg) {
    struct Op {
      WorkPtr work;
      Tensor tensor;
      double expected;  // every element
    };
    std::vector<Op> ops;
    const double ranks_sum = 1 + 2 + 3;
    for (int i = 0; i < 40; ++i) {
      const float mine = static_cast<float>((pg.rank() + 1) * (i + 1));
      Tensor inline_sum = filled(14, mine);  // 56 bytes: inline
      ops.push_back({pg.all_reduce(inline_sum), inline_sum, ranks_sum * (i + 1)});
      Tensor slot_sum = filled(15, mine);  // 60 bytes: the slot
      ops.push_back({pg.all_reduce(slot_sum), slot_sum, ranks_sum * (i + 1)});
      const int root = i % pg.size();
      Tensor bcast = filled(2, pg.rank() == root ? static_cast<float>(1000 + i) : -1.0f);
      BroadcastOptions bo;
      bo.root = root;
      ops.push_back({pg.broadcast(bcast, bo), bcast, 1000.0 + i});
      ops.push_back({pg.barrier(), Tensor(), 0});
    }
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) it->work->wait();
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].tensor.numel() > 0) expect_all(ops[k].tensor, ops[k].expected, "op " + std::to_string(k));
    }
    Tensor in = filled(3, static_cast<float>(pg.rank()));  // all_gather of 12-byte blocks: inline
    Tensor out = Tensor::empty({3 * pg.size()});
    pg.all_gather_into_tensor(out, in)->wait();
    for (int r = 0; r < pg.size(); ++r) {
      for (int j = 0; j < 3; ++j) EXPECT_EQ(out.data_as<float>()[r * 3 + j], static_cast<float>(r));
    }
  }, options);
}

// A second group over the world's store, with this rank's settings.
ProcessGroupPtr group_with(ProcessGroup& world, const std::string& name, const std::string& key,
                           const std::string& value) {
  ProcessGroupOptions o;
  o.store = world.store();
  o.rank = world.rank();
  o.size = world.size();
  o.backend = "shm";
  o.group_name = name;
  o.timeout = milliseconds(20000);
  o.backend_config[key] = value;
  return ProcessGroup::create(o);
}

std::string invalid_argument_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InvalidArgument";
  return "";
}

TEST(ShmBackend, SettingsThatShapeTheSegmentMustAgree) {
  run_group(2, "shm", [](ProcessGroup& world) {
    const std::string msg = invalid_argument_of(
        [&] { group_with(world, "mismatched", "shm_slot_bytes", world.rank() == 0 ? "65536" : "131072"); });
    EXPECT_NE(msg.find(world.rank() == 0 ? "rank 1" : "rank 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("slot_bytes"), std::string::npos) << msg;
  });
}

// DISTCOMM_HOST_ID makes ranks count as on different hosts whatever their kernel says
// (docs/many-hosts.md): shm refuses them, on every rank, naming both ranks' ids, as it
// refuses ranks of different kernels. The world group runs over gloo, which spans hosts.
TEST(ShmBackend, RanksWithDifferentHostIdsAreRefused) {
  GroupHarnessOptions options;
  options.host_ids = {"host0", "host1"};
  run_group(2, "gloo", [](ProcessGroup& world) {
    ProcessGroupOptions o;
    o.store = world.store();
    o.rank = world.rank();
    o.size = world.size();
    o.backend = "shm";
    o.group_name = "across_hosts";
    o.timeout = milliseconds(20000);
    std::string msg;
    try {
      ProcessGroup::create(o);
      ADD_FAILURE() << "rank " << world.rank() << ": an shm group across host ids host0 and host1 was created";
    } catch (const BackendUnavailable& e) {
      msg = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << world.rank() << ": the wrong error: " << e.what();
    }
    const int peer = 1 - world.rank();
    EXPECT_NE(msg.find("DISTCOMM_HOST_ID"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank " + std::to_string(peer) + " has DISTCOMM_HOST_ID 'host" + std::to_string(peer) + "'"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("this rank (" + std::to_string(world.rank()) + ") 'host" + std::to_string(world.rank()) + "'"),
              std::string::npos) << msg;
    world.barrier()->wait();  // the world group still works
  }, options);
}

TEST(ShmBackend, RanksWithTheSameHostIdShareMemory) {
  GroupHarnessOptions options;
  options.host_ids = {"hostA", "hostA"};
  run_group(2, "shm", [](ProcessGroup& pg) {
    Tensor t = filled(1000, 1.0f);
    pg.all_reduce(t)->wait();
    expect_all(t, 2.0, "all_reduce of ranks with one host id");
  }, options);
}

TEST(ShmBackend, BadSettingIsRefusedNamingTheKey) {
  run_group(1, "shm", [](ProcessGroup& world) {
    const std::string msg = invalid_argument_of([&] { group_with(world, "bad", "shm_slots", "1"); });
    EXPECT_NE(msg.find("shm_slots"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 64]"), std::string::npos) << msg;
  });
}

// The segment is reachable only through /proc/<pid>/fd of its owner (ptrace-read access to
// the owner), and then by its file mode: 0600, the owner's user alone (a memfd starts 0777).
TEST(ShmBackend, SegmentsAreReadableAndWritableByTheirOwnerOnly) {
  run_group(2, "shm", [](ProcessGroup& pg) {
    const std::string own = "/memfd:distcomm-shm-world-rank" + std::to_string(pg.rank()) + " (deleted)";
    int found = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
      while (dirent* e = ::readdir(d)) {
        const std::string fd_path = std::string("/proc/self/fd/") + e->d_name;
        char target[512] = {};
        if (::readlink(fd_path.c_str(), target, sizeof(target) - 1) <= 0 || own != target) continue;
        struct stat st {};
        ASSERT_EQ(::stat(fd_path.c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 07777, 0600u) << "the mode of this rank's segment";
        EXPECT_EQ(st.st_uid, ::getuid());
        ++found;
      }
      ::closedir(d);
    }
    EXPECT_EQ(found, 1) << "this rank's segment among its descriptors";
  });
}

TEST(ShmBackend, DestroyedGroupsLeaveNothingMappedOrOpen) {
  run_group(2, "shm", [](ProcessGroup& world) {
    const int fds = open_descriptors();
    const int maps = mapped_shm_segments();
    for (int i = 0; i < 20; ++i) {
      ProcessGroupPtr g = world.new_group({0, 1});
      Tensor t = filled(1000, 1.0f);
      g->all_reduce(t)->wait();
      expect_all(t, 2.0, "all_reduce in a short-lived group");
      EXPECT_GT(mapped_shm_segments(), maps);
    }
    world.barrier()->wait();
    EXPECT_EQ(open_descriptors(), fds) << "descriptors left open by 20 destroyed groups";
    EXPECT_EQ(mapped_shm_segments(), maps) << "segments left mapped by 20 destroyed groups";
  });
}

}  // namespace
}  // namespace distcomm
