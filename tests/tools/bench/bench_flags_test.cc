#include "tools/bench/bench_flags.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "api/errors.h"

namespace distcomm {
namespace bench {
namespace {

TEST(ParseSize, PlainAndSuffixed) {
  EXPECT_EQ(parse_size("0"), 0);
  EXPECT_EQ(parse_size("8"), 8);
  EXPECT_EQ(parse_size("64K"), 64 * 1024);
  EXPECT_EQ(parse_size("64k"), 64 * 1024);
  EXPECT_EQ(parse_size("1M"), 1 << 20);
  EXPECT_EQ(parse_size("64M"), int64_t{64} << 20);
  EXPECT_EQ(parse_size("2G"), int64_t{2} << 30);
  EXPECT_EQ(parse_size("3g"), int64_t{3} << 30);
}

TEST(ParseSize, RejectsMalformed) {
  for (const char* bad : {"", "K", "-8", "8KB", "1.5M", "8 ", "0x10", "12T", "9999999999999"}) {
    EXPECT_THROW(parse_size(bad, "-b"), InvalidArgument) << bad;
  }
  try {
    parse_size("lots", "-e");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("-e"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lots"), std::string::npos) << e.what();
  }
}

// Found by a review: 8589934592G overflowed to -2^63, passed -b <= -e, and the sweep grew
// until the kernel killed bench at 12 GB; 17179869184G wrapped to 0.
TEST(ParseSize, RefusesSizesPastAPetabyte) {
  EXPECT_EQ(parse_size("1048576G"), int64_t{1} << 50);
  for (const char* huge : {"1048577G", "8589934592G", "17179869184G", "999999999999G"}) {
    try {
      parse_size(huge, "-b");
      ADD_FAILURE() << huge << " was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("is more than 1 PiB"), std::string::npos) << e.what();
    }
  }
}

TEST(SizeSweep, RefusesASweepOfTooManySizesAndNeverOverflows) {
  BenchFlags f;
  f.min_bytes = 8;
  f.max_bytes = int64_t{1} << 40;
  f.step_factor = 1;
  f.step_bytes = 1;
  try {
    size_sweep(f);
    ADD_FAILURE() << "a sweep of 2^40 sizes was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("is more than 4096 sizes"), std::string::npos) << e.what();
  }
  // The largest sizes by the largest factor: one step past -e is never taken.
  f.min_bytes = int64_t{1} << 49;
  f.max_bytes = int64_t{1} << 50;
  f.step_factor = std::numeric_limits<int>::max();
  EXPECT_EQ(size_sweep(f), std::vector<int64_t>{int64_t{1} << 49});
  f.step_factor = 2;
  EXPECT_EQ(size_sweep(f), (std::vector<int64_t>{int64_t{1} << 49, int64_t{1} << 50}));
}

TEST(ParseFlags, DefaultsAreNcclTests) {
  const BenchFlags f = parse_bench_flags({});
  EXPECT_EQ(f.op, BenchOp::kAllReduce);
  EXPECT_EQ(f.min_bytes, 32 << 20);
  EXPECT_EQ(f.max_bytes, 32 << 20);
  EXPECT_EQ(f.iters, 20);
  EXPECT_EQ(f.warmup_iters, 5);
  EXPECT_EQ(f.check_iters, 1);
  EXPECT_EQ(f.dtype, DType::kFloat32);
  EXPECT_EQ(f.redop.kind, ReduceOp::SUM);
  EXPECT_EQ(f.rank_time, RankTime::kMax);  // bench's default (nccl-tests' is 1, the average)
  EXPECT_EQ(f.nproc, 0);
}

TEST(ParseFlags, ShortAndLongForms) {
  const BenchFlags f = parse_bench_flags({"--op=all_gather", "--backend", "mpi", "-b", "8", "-e64M", "-f", "4",
                                          "-n", "7", "-w", "2", "-c", "3", "-d", "int32", "-o", "max", "-r",
                                          "1", "-a", "--nproc=3", "--json=/tmp/x.json", "--data_varying",
                                          "--plot", "p.svg", "--timeout=9"});
  EXPECT_EQ(f.op, BenchOp::kAllGather);
  EXPECT_EQ(f.backend, "mpi");
  EXPECT_EQ(f.min_bytes, 8);
  EXPECT_EQ(f.max_bytes, int64_t{64} << 20);
  EXPECT_EQ(f.step_factor, 4);
  EXPECT_EQ(f.iters, 7);
  EXPECT_EQ(f.warmup_iters, 2);
  EXPECT_EQ(f.check_iters, 3);
  EXPECT_EQ(f.dtype, DType::kInt32);
  EXPECT_EQ(f.redop.kind, ReduceOp::MAX);
  EXPECT_EQ(f.root, 1);
  EXPECT_EQ(f.rank_time, RankTime::kAverage);  // a bare -a
  EXPECT_EQ(f.nproc, 3);
  EXPECT_EQ(f.json_path, "/tmp/x.json");
  EXPECT_TRUE(f.data_varying);
  EXPECT_EQ(f.plot_path, "p.svg");
  EXPECT_EQ(f.timeout_s, 9);
  EXPECT_TRUE(f.backend_config.empty());
  EXPECT_FALSE(f.corrupt_for_test);

  const BenchFlags g = parse_bench_flags({"--minbytes=1K", "--maxbytes", "4K", "--stepbytes=1K", "--average=0",
                                          "--plot=a.svg", "--plot_inputs=a.json,b.json"});
  EXPECT_EQ(g.min_bytes, 1024);
  EXPECT_EQ(g.step_bytes, 1024);
  EXPECT_EQ(g.rank_time, RankTime::kRank0);
  EXPECT_EQ(g.plot_inputs, (std::vector<std::string>{"a.json", "b.json"}));

  EXPECT_EQ(parse_bench_flags({"-a", "0", "-n", "3"}).iters, 3);
}

// nccl-tests' -a N: 0 rank 0's time, 1 the average, 2 the min, 3 the max, in every spelling.
TEST(ParseFlags, AverageTakesNcclTestsValues) {
  EXPECT_EQ(parse_bench_flags({"-a", "0", "-n", "3"}).rank_time, RankTime::kRank0);
  EXPECT_EQ(parse_bench_flags({"-a", "1"}).rank_time, RankTime::kAverage);
  EXPECT_EQ(parse_bench_flags({"-a", "2"}).rank_time, RankTime::kMin);
  EXPECT_EQ(parse_bench_flags({"-a", "3"}).rank_time, RankTime::kMax);
  EXPECT_EQ(parse_bench_flags({"-a2"}).rank_time, RankTime::kMin);
  EXPECT_EQ(parse_bench_flags({"--average=3"}).rank_time, RankTime::kMax);
  EXPECT_EQ(parse_bench_flags({"--average", "0"}).rank_time, RankTime::kRank0);
  EXPECT_EQ(parse_bench_flags({"--average"}).rank_time, RankTime::kAverage);
  EXPECT_EQ(parse_bench_flags({"-a", "-n", "3"}).rank_time, RankTime::kAverage);
  for (const char* bad : {"4", "x", "11"}) {
    try {
      parse_bench_flags({"-a", bad});
      ADD_FAILURE() << "accepted -a " << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("-a expects nccl-tests' 0 (rank 0's time)"), std::string::npos) << e.what();
    }
  }
}

// The flag is named once, with its own dashes.
TEST(ParseFlags, EmptySizesNamesTheFlagOnce) {
  try {
    parse_bench_flags({"--sizes="});
    ADD_FAILURE() << "accepted --sizes=";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "--sizes needs at least one size");
  }
}

TEST(ParseFlags, MistakesNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    const char* mentions;
  };
  const std::vector<Case> cases = {
      {{"--op=allreduce"}, "all_reduce"},
      {{"-b"}, "-b needs a value"},
      {{"-n", "0"}, "-n"},
      {{"-n", "x"}, "-n"},
      {{"-w", "-1"}, "-w"},
      {{"--frobnicate"}, "--frobnicate"},
      {{"-b", "64M", "-e", "8"}, "larger than -e"},
      {{"-b", "0", "-e", "8", "-f", "2"}, "never grows"},
      {{"-f", "2", "-i", "8"}, "not both"},
      {{"-d", "float128"}, "float128"},
      {{"-o", "mean"}, "mean"},
      {{"-d", "float32", "-o", "band"}, "bitwise"},
      {{"-d", "bool", "-o", "avg"}, "bool"},
      {{"--corrupt_for_test", "-c", "0"}, "-c 1"},
      {{"--plot_inputs=a.json"}, "--plot"},
      {{"--nproc=0"}, "--nproc"},
      {{"--nproc=3", "--op=broadcast", "-r", "5"}, "-r/--root 5 is not a rank of this 3-rank job (--nproc=3): expected 0 to 2"},
      {{"--data_varying=maybe"}, "--data_varying"},
      {{"--config=shm_slots"}, "--config expects key=value"},
      {{"--config", "=4"}, "--config expects key=value"},
  };
  for (const Case& c : cases) {
    try {
      parse_bench_flags(c.args);
      ADD_FAILURE() << "accepted " << testing::PrintToString(c.args);
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(c.mentions), std::string::npos)
          << testing::PrintToString(c.args) << " -> " << e.what();
    }
  }
  // A bitwise op on floats only matters for ops that reduce; a root, for ops that have one.
  EXPECT_NO_THROW(parse_bench_flags({"--op=all_gather", "-o", "band"}));
  EXPECT_NO_THROW(parse_bench_flags({"--op=all_gather", "-r", "5", "--nproc=3"}));
  EXPECT_NO_THROW(parse_bench_flags({"--op=broadcast", "-r", "2", "--nproc=3"}));
}

TEST(ParseFlags, ConfigPairsReachTheBackendSettings) {
  const BenchFlags f = parse_bench_flags({"--config=shm_slot_bytes=262144,shm_slots=8", "--config", "a=x=y"});
  EXPECT_EQ(f.backend_config, (std::map<std::string, std::string>{
                                  {"shm_slot_bytes", "262144"}, {"shm_slots", "8"}, {"a", "x=y"}}));
}

TEST(SizeSweep, FactorStepAndSingle) {
  BenchFlags f = parse_bench_flags({"-b", "8", "-e", "64M", "-f", "4"});
  std::vector<int64_t> sizes = size_sweep(f);
  ASSERT_EQ(sizes.size(), 12u);
  EXPECT_EQ(sizes.front(), 8);
  EXPECT_EQ(sizes[1], 32);
  EXPECT_EQ(sizes.back(), int64_t{32} << 20);  // 8 * 4^11 = 32M; 8 * 4^12 = 128M is past -e

  f = parse_bench_flags({"-b", "1K", "-e", "4K", "-i", "1K"});
  EXPECT_EQ(size_sweep(f), (std::vector<int64_t>{1024, 2048, 3072, 4096}));

  f = parse_bench_flags({"-b", "100", "-e", "100"});
  EXPECT_EQ(size_sweep(f), (std::vector<int64_t>{100}));

  f = parse_bench_flags({"-b", "0", "-e", "0"});
  EXPECT_EQ(size_sweep(f), (std::vector<int64_t>{0}));
}

// An explicit list in its order, and fewer iterations from 1 MiB (the anchors' 200 / 10).
TEST(SizeSweep, AListOfSizesAndIterationsBySize) {
  BenchFlags f = parse_bench_flags({"--sizes=8,64K,1M,16M", "-n", "200", "--large_iters=10"});
  EXPECT_EQ(size_sweep(f), (std::vector<int64_t>{8, 65536, 1 << 20, 16 << 20}));
  EXPECT_EQ(iters_at(f, 65536), 200);
  EXPECT_EQ(iters_at(f, (1 << 20) - 1), 200);
  EXPECT_EQ(iters_at(f, 1 << 20), 10);
  f = parse_bench_flags({"--sizes=1M", "-n", "7"});
  EXPECT_EQ(iters_at(f, 1 << 20), 7) << "without --large_iters, -n everywhere";
  EXPECT_THROW(parse_bench_flags({"--sizes=8,x"}), InvalidArgument);
  EXPECT_THROW(parse_bench_flags({"--sizes="}), InvalidArgument);
  EXPECT_THROW(parse_bench_flags({"--large_iters=0"}), InvalidArgument);
}

TEST(Usage, MentionsEveryFlag) {
  const std::string u = bench_usage("bench");
  for (const char* flag : {"--op", "--backend", "--nproc", "-b", "-e", "-f", "-i", "-n", "-w", "-c", "-d", "-o",
                           "-r", "-a", "--json", "--plot", "--plot_inputs", "--data_varying", "--timeout", "--sizes",
                           "--large_iters", "--config"}) {
    EXPECT_NE(u.find(flag), std::string::npos) << flag;
  }
  EXPECT_EQ(u.find("corrupt"), std::string::npos) << "the test-only flag stays hidden";
}

// -c where no check can see every rank (the truncated average of int8 over 128 ranks is
// always 0) is a bad flag with --nproc, naming -c 0; elsewhere it is accepted.
TEST(ParseFlags, CheckRefusedWhereNoRankCanBeSeen) {
  try {
    parse_bench_flags({"-d", "int8", "-o", "avg", "--nproc=128"});
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("int8 avg over 128 ranks (--nproc=128)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("-c 0"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(parse_bench_flags({"-d", "int8", "-o", "avg", "--nproc=128", "-c", "0"}));
  EXPECT_NO_THROW(parse_bench_flags({"-d", "int8", "-o", "avg", "--nproc=127"}));
  EXPECT_NO_THROW(parse_bench_flags({"-d", "int8", "-o", "sum", "--nproc=300"}));
  EXPECT_NO_THROW(parse_bench_flags({"-d", "float32", "-o", "avg", "--nproc=300"}));
  const BenchFlags f = parse_bench_flags({"-d", "uint8", "-o", "avg"});
  EXPECT_THROW(check_checkable(f, 256), InvalidArgument);
  EXPECT_NO_THROW(check_checkable(f, 255));
}

// nccl serves only CUDA tensors: its buffers go on the GPU unless --device says otherwise.
TEST(BenchFlags, DeviceIsCudaForNcclUnlessChosen) {
  EXPECT_EQ(parse_bench_flags({}).device, "auto");
  EXPECT_TRUE(uses_cuda(parse_bench_flags({}), "nccl"));
  EXPECT_FALSE(uses_cuda(parse_bench_flags({}), "gloo"));
  EXPECT_FALSE(uses_cuda(parse_bench_flags({}), "auto"));
  EXPECT_FALSE(uses_cuda(parse_bench_flags({"--device", "cpu"}), "nccl"));
  EXPECT_TRUE(uses_cuda(parse_bench_flags({"--device=cuda"}), "cpu:gloo,cuda:nccl"));
  EXPECT_THROW(parse_bench_flags({"--device", "gpu"}), InvalidArgument);
  EXPECT_NE(bench_usage("bench").find("--device"), std::string::npos);
}

}  // namespace
}  // namespace bench
}  // namespace distcomm
