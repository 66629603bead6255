// The ProcessGroup's own logic at group sizes above one, over the in_process test plugin
// (N ProcessGroups of this process, tests/testing/in_process_group.h): AVG and PREMUL_SUM
// done on the host (the plugin reduces neither, and refuses them if asked), list packing,
// capability refusal, validation that names the rank, subgroups, the group's timeout.
#include <gtest/gtest.h>

#include <chrono>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace {

using testing::in_process_world;
using testing::on_every_rank;
using Doubles = std::vector<double>;

// What fn throws, as "Type: message", or "nothing".
template <typename Fn>
std::string thrown(Fn fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return std::string("InvalidArgument: ") + e.what();
  } catch (const Unsupported& e) {
    return std::string("Unsupported: ") + e.what();
  } catch (const Timeout& e) {
    return std::string("Timeout: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
  return "nothing";
}

TEST(ProcessGroupRanks, AverageIsTheSumDividedByTheGroupSize) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    const double r = pg.rank() + 1;  // 1, 2, 3: sum 6
    AllReduceOptions avg;
    avg.op = ReduceOp::AVG;
    Tensor f = Tensor::of<float>({float(r), float(10 * r)});
    pg.all_reduce(f, avg)->wait();
    EXPECT_EQ(f.to_doubles(), (Doubles{2, 20})) << "rank " << pg.rank();
    Tensor d = Tensor::of<double>({r * 3});
    pg.all_reduce(d, avg)->wait();
    EXPECT_EQ(d.to_doubles(), (Doubles{6})) << "rank " << pg.rank();
    std::vector<Tensor> list = {Tensor::of<float>({float(r)}), Tensor::of<float>({float(2 * r), 0})};
    pg.all_reduce_coalesced(list, avg)->wait();
    EXPECT_EQ(list[0].to_doubles(), (Doubles{2}));
    EXPECT_EQ(list[1].to_doubles(), (Doubles{4, 0}));
  });
}

TEST(ProcessGroupRanks, PremulSumScalesEveryInputBeforeTheSum) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    AllReduceOptions o;
    o.op = ReduceOp::premul_sum(0.5);
    Tensor t = Tensor::of<float>({float(pg.rank() + 1), 4});
    pg.all_reduce(t, o)->wait();
    EXPECT_EQ(t.to_doubles(), (Doubles{3, 6})) << "rank " << pg.rank();
  });
}

// reduce: the result on the root only; every other rank's tensor stays as it was, even
// when the core scaled a copy of it (PREMUL_SUM) or divides the root's result (AVG).
TEST(ProcessGroupRanks, ReduceAveragesAndScalesAtTheRootAndLeavesTheOthersAlone) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    const float mine = float(pg.rank() + 1);
    ReduceOptions avg;
    avg.op = ReduceOp::AVG;
    avg.root = 1;
    Tensor a = Tensor::of<float>({mine, 3 * mine});
    pg.reduce(a, avg)->wait();
    EXPECT_EQ(a.to_doubles(), pg.rank() == 1 ? (Doubles{2, 6}) : (Doubles{mine, 3 * mine})) << "rank " << pg.rank();

    ReduceOptions premul;
    premul.op = ReduceOp::premul_sum(2);
    premul.root = 2;
    Tensor p = Tensor::of<float>({mine});
    pg.reduce(p, premul)->wait();
    EXPECT_EQ(p.to_doubles(), pg.rank() == 2 ? (Doubles{12}) : (Doubles{mine})) << "rank " << pg.rank();
  });
}

// Rank r's input holds block q = {10r + 2q, 10r + 2q + 1}; rank q gets the reduction of block q.
TEST(ProcessGroupRanks, ReduceScatterAveragesAndScalesEachBlockAndKeepsTheInput) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    const int r = pg.rank();
    std::vector<float> values;
    for (int i = 0; i < 6; ++i) values.push_back(float(10 * r + i));
    const Tensor input = Tensor::of<float>(values);
    const Doubles before = input.to_doubles();
    const double q = r;  // this rank's block: the sum over ranks of 10s + 2q (+1) = 30 + 6q (+3)
    const Doubles sum = {30 + 6 * q, 33 + 6 * q};

    ReduceScatterOptions avg;
    avg.op = ReduceOp::AVG;
    Tensor out = Tensor::zeros({2});
    pg.reduce_scatter_tensor(out, input, avg)->wait();
    EXPECT_EQ(out.to_doubles(), (Doubles{sum[0] / 3, sum[1] / 3})) << "rank " << r;

    ReduceScatterOptions premul;
    premul.op = ReduceOp::premul_sum(0.5);
    pg.reduce_scatter_tensor(out, input, premul)->wait();
    EXPECT_EQ(out.to_doubles(), (Doubles{sum[0] / 2, sum[1] / 2})) << "rank " << r;
    EXPECT_EQ(input.to_doubles(), before) << "rank " << r << ": the caller's input was changed";

    std::vector<Tensor> blocks;
    for (int b = 0; b < 3; ++b) blocks.push_back(input.flat_slice(2 * b, 2).clone());
    pg.reduce_scatter(out, blocks, avg)->wait();
    EXPECT_EQ(out.to_doubles(), (Doubles{sum[0] / 3, sum[1] / 3})) << "rank " << r;
  });
}

TEST(ProcessGroupRanks, ListFormsPackAndUnpackInRankOrder) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    const int r = pg.rank();
    const Tensor mine = Tensor::of<int32_t>({10 * r, 10 * r + 1});

    std::vector<Tensor> gathered(3);
    for (auto& t : gathered) t = Tensor::zeros({2}, DType::kInt32);
    pg.all_gather(gathered, mine)->wait();
    for (int s = 0; s < 3; ++s) EXPECT_EQ(gathered[s].to_doubles(), (Doubles{10.0 * s, 10.0 * s + 1})) << "rank " << r;

    GatherOptions at2;
    at2.root = 2;
    std::vector<Tensor> at_root;
    if (r == 2) {
      for (int s = 0; s < 3; ++s) at_root.push_back(Tensor::zeros({2}, DType::kInt32));
    }
    pg.gather(at_root, mine, at2)->wait();
    for (int s = 0; s < int(at_root.size()); ++s) EXPECT_EQ(at_root[s].to_doubles(), (Doubles{10.0 * s, 10.0 * s + 1}));

    ScatterOptions from1;
    from1.root = 1;
    std::vector<Tensor> pieces;
    if (r == 1) {
      for (int s = 0; s < 3; ++s) pieces.push_back(Tensor::of<int32_t>({100 + s, 200 + s}));
    }
    Tensor piece = Tensor::zeros({2}, DType::kInt32);
    pg.scatter(piece, pieces, from1)->wait();
    EXPECT_EQ(piece.to_doubles(), (Doubles{100.0 + r, 200.0 + r})) << "rank " << r;

    BroadcastOptions from2;
    from2.root = 2;
    Tensor b = Tensor::of<int32_t>({r, r});
    pg.broadcast(b, from2)->wait();
    EXPECT_EQ(b.to_doubles(), (Doubles{2, 2})) << "rank " << r;

    // all_to_all with sizes that differ per pair: rank s sends rank d (s + d + 1) copies of 10s + d.
    std::vector<Tensor> outs, ins;
    for (int d = 0; d < 3; ++d) {
      ins.push_back(Tensor::zeros({r + d + 1}, DType::kInt32));
      ins.back().fill(10 * r + d);
      outs.push_back(Tensor::zeros({d + r + 1}, DType::kInt32));
    }
    pg.all_to_all(outs, ins)->wait();
    for (int s = 0; s < 3; ++s) EXPECT_EQ(outs[s].to_doubles(), Doubles(size_t(s + r + 1), 10.0 * s + r)) << "rank " << r;

    // all_to_all_single, equal splits: rows of 2 elements, row d of rank s is {s, d}.
    Tensor in = Tensor::of<int32_t>({r, 0, r, 1, r, 2});
    Tensor out = Tensor::zeros({3, 2}, DType::kInt32);
    pg.all_to_all_single(out, in.reshape({3, 2}))->wait();
    EXPECT_EQ(out.to_doubles(), (Doubles{0, 1.0 * r, 1, 1.0 * r, 2, 1.0 * r})) << "rank " << r;
  });
}

TEST(ProcessGroupRanks, ZeroElementOpsCompleteAndKeepTheRanksInStep) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    Tensor empty = Tensor::empty({0});
    pg.all_reduce(empty)->wait();
    Tensor none = Tensor::empty({0});
    pg.all_gather_into_tensor(none, empty)->wait();
    EXPECT_EQ(none.numel(), 0);
    Tensor t = Tensor::of<float>({float(pg.rank())});
    pg.all_reduce(t)->wait();  // the next op pairs with the same op on every rank
    EXPECT_EQ(t.to_doubles(), (Doubles{3}));
    EXPECT_EQ(pg.next_seq(), 3u);
  });
}

// An op the backend does not list is refused on the rank that issues it with Unsupported,
// before a sequence number is taken; the ops it lists go on working.
TEST(ProcessGroupRanks, AnOpTheBackendDoesNotListIsUnsupported) {
  testing::InProcessOptions o;
  o.config["in_process_ops"] = "all_reduce,barrier";
  auto world = in_process_world(2, o);
  ProcessGroup& pg = *world[1];
  Tensor t = Tensor::of<float>({1});
  EXPECT_EQ(thrown([&] { pg.broadcast(t); }),
            "Unsupported: rank 1/2 group 'world' broadcast: backend in_process does not support broadcast");
  EXPECT_EQ(thrown([&] { pg.send(t, 0); }),
            "Unsupported: rank 1/2 group 'world' send: backend in_process does not support send");
  EXPECT_EQ(pg.next_seq(), 0u);
  on_every_rank(world, [](ProcessGroup& g) {
    Tensor one = Tensor::of<float>({1});
    g.all_reduce(one)->wait();
    EXPECT_EQ(one.to_doubles(), (Doubles{2}));
  });
}

// Checks that depend on the group's size and this rank's place in it.
TEST(ProcessGroupRanks, InvalidArgumentsNameTheRankAndWhatWasExpected) {
  auto world = in_process_world(3);
  ProcessGroup& pg = *world[1];
  Tensor t = Tensor::of<float>({1, 2});
  std::vector<Tensor> three = {t.clone(), t.clone(), t.clone()};
  EXPECT_EQ(thrown([&] { pg.gather(three, t); }),
            "InvalidArgument: rank 1/3 group 'world' gather: 'outputs' must be empty on non-root ranks (root is 0)");
  ScatterOptions mine;
  mine.root = 1;
  std::vector<Tensor> two = {t.clone(), t.clone()};
  EXPECT_EQ(thrown([&] { pg.scatter(t, two, mine); }),
            "InvalidArgument: rank 1/3 group 'world' scatter: 'inputs' has 2 tensors, expected one per rank (3) on "
            "the root");
  EXPECT_EQ(thrown([&] { pg.send(t, 1); }), "InvalidArgument: rank 1/3 group 'world' send: dst is this rank itself (1)");
  EXPECT_EQ(thrown([&] { pg.recv(t, 3); }), "InvalidArgument: rank 1/3 group 'world' recv: src 3 is outside [0, 3)");
  Tensor four = Tensor::empty({4});
  Tensor out4 = Tensor::empty({4});
  EXPECT_EQ(thrown([&] { pg.all_to_all_single(out4, four); }),
            "InvalidArgument: rank 1/3 group 'world' all_to_all: 'output' has 4 rows, not divisible by the group "
            "size 3; pass split sizes");
  Tensor whole = Tensor::empty({4});
  EXPECT_EQ(thrown([&] { pg.all_gather_into_tensor(whole, t); }),
            "InvalidArgument: rank 1/3 group 'world' all_gather: 'output' has 4 elements, expected 6 (size() * "
            "input.numel())");
  EXPECT_EQ(pg.next_seq(), 0u) << "a refused op takes no sequence number";
}

TEST(ProcessGroupRanks, SendAndReceiveMatchByPeerAndTag) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    if (pg.rank() == 0) {
      P2POptions tag1, tag2;
      tag1.tag = 1;
      tag2.tag = 2;
      pg.send(Tensor::of<float>({1}), 2, tag1)->wait();
      pg.send(Tensor::of<float>({2}), 2, tag2)->wait();
    } else if (pg.rank() == 1) {
      pg.send(Tensor::of<float>({3}), 2)->wait();
    } else {
      P2POptions tag1, tag2;
      tag1.tag = 1;
      tag2.tag = 2;
      Tensor a = Tensor::zeros({1}), b = Tensor::zeros({1}), c = Tensor::zeros({1});
      pg.recv(b, 0, tag2)->wait();
      pg.recv(a, 0, tag1)->wait();
      WorkPtr any = pg.recv_any_source(c);
      any->wait();
      EXPECT_EQ(a.item(), 1);
      EXPECT_EQ(b.item(), 2);
      EXPECT_EQ(c.item(), 3);
      EXPECT_EQ(any->source_rank(), 1);
    }
  });
}

TEST(ProcessGroupRanks, SubgroupsMapTheirRanksToTheWorld) {
  auto world = in_process_world(4);
  on_every_rank(world, [](ProcessGroup& pg) {
    auto odd = pg.new_group({3, 1});
    if (pg.rank() % 2 == 0) {
      EXPECT_EQ(odd, nullptr);
    } else {
      ASSERT_NE(odd, nullptr);
      EXPECT_EQ(odd->global_ranks(), (std::vector<int>{1, 3}));
      EXPECT_EQ(odd->global_rank(1), 3);
      EXPECT_EQ(odd->rank(), pg.rank() / 2);
      Tensor t = Tensor::of<float>({float(pg.rank())});
      odd->all_reduce(t)->wait();
      EXPECT_EQ(t.item(), 4);
    }
    // Same parity, ordered by descending world rank.
    auto same = pg.split(pg.rank() % 2, -pg.rank());
    ASSERT_NE(same, nullptr);
    EXPECT_EQ(same->global_ranks(), pg.rank() % 2 ? (std::vector<int>{3, 1}) : (std::vector<int>{2, 0}));
    Tensor t = Tensor::of<float>({float(pg.rank())});
    BroadcastOptions from0;
    same->broadcast(t, from0)->wait();
    EXPECT_EQ(t.item(), pg.rank() % 2 ? 3 : 2);
    EXPECT_EQ(pg.global_ranks(), (std::vector<int>{0, 1, 2, 3}));
  });
}

// A plugin that does not find its peers by itself needs the world's store.
TEST(ProcessGroupRanks, ABackendThatNeedsAStoreIsRefusedWithoutOne) {
  in_process_world(1);  // puts the plugin's folder on the search path
  EXPECT_TRUE(ProcessGroup::needs_store("in_process"));
  ProcessGroupOptions o;
  o.size = 2;
  o.backend = "in_process";
  EXPECT_EQ(thrown([&] { ProcessGroup::create(o); }),
            "InvalidArgument: ProcessGroup: backend 'in_process' finds its peers through a store shared by every "
            "rank, and none was given");
}

// An op that not every rank joins fails with Timeout after the group's timeout (no op
// timeout given), not before and not long after.
TEST(ProcessGroupRanks, TheGroupTimeoutIsEveryOpsDefault) {
  testing::InProcessOptions o;
  o.timeout = std::chrono::milliseconds(300);
  auto world = in_process_world(2, o);
  EXPECT_EQ(world[0]->timeout(), std::chrono::milliseconds(300));
  Tensor t = Tensor::of<float>({1});
  const auto start = std::chrono::steady_clock::now();
  WorkPtr w = world[0]->all_reduce(t);  // rank 1 never joins
  const std::string error = thrown([&] { w->wait(); });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_NE(error.find("Timeout: rank 0/2 group 'world' all_reduce #0"), std::string::npos) << error;
  EXPECT_NE(error.find("300 ms"), std::string::npos) << error;
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::milliseconds(300 + 3000)) << "3 s of slack for a loaded machine";
}

}  // namespace
}  // namespace distcomm
