// The bench binary as a user runs it: real ranks (--nproc), the real gloo and shm plugins,
// the table on stdout, JSON and SVG files, and the exit status.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testing/subprocess.h"
#include "tools/bench/bench_record.h"

namespace distcomm {
namespace bench {
namespace {

using testing::read_file;
using testing::run_program;
using testing::runfile;
using testing::temp_path;

using Outcome = testing::ProgramOutcome;

Outcome run_bench(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {runfile("tools/bench/bench")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv);
}

std::vector<BenchRecord> run_to_json(const std::vector<std::string>& args, const std::string& json, Outcome* out) {
  std::vector<std::string> all = args;
  all.push_back("--json=" + json);
  *out = run_bench(all);
  return records_from_json_lines(read_file(json), json);
}

// Over gloo, named: with no backend the bench takes init's default (auto: shm here), which
// the shm case below covers.
const std::vector<std::string> kSmall = {"--backend=gloo", "-b", "8", "-e", "4K", "-f", "8", "-n", "3", "-w", "1"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// Every op with 2, 3 and 4 ranks: the run succeeds, every result is checked and right.
TEST(BenchEndToEnd, EveryOpIsRightWithTwoThreeAndFourRanks) {
  const std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                        "all_to_all", "gather",     "scatter",        "send_recv", "barrier"};
  for (int nproc : {2, 3, 4}) {
    for (const std::string& op : ops) {
      SCOPED_TRACE(op + " with " + std::to_string(nproc) + " ranks");
      Outcome out;
      // A root other than 0 where there is one.
      const std::string json = temp_path(op + std::to_string(nproc) + ".json");
      const auto records = run_to_json(
          with(kSmall, {"--op=" + op, "--nproc=" + std::to_string(nproc), "-r", std::to_string(nproc - 1)}),
          json, &out);
      ASSERT_EQ(out.exit_code, 0) << out.output;
      // A barrier has no result: nothing is checked, and the footer gives no verdict.
      EXPECT_NE(out.output.find(op == "barrier" ? "# Out of bounds values : N/A" : "# Out of bounds values : 0 OK"),
                std::string::npos)
          << out.output;
      ASSERT_FALSE(records.empty()) << out.output;
      // 8, 64, 512, 4096 bytes; one row for a barrier.
      const size_t rows = op == "barrier" ? 1 : 4;
      const size_t forms = (op == "barrier" || op == "all_reduce" || op == "broadcast" || op == "reduce" ||
                            op == "all_to_all" || op == "send_recv") ? 1 : 2;
      EXPECT_EQ(records.size(), rows * forms) << out.output;
      for (const BenchRecord& r : records) {
        EXPECT_EQ(r.op, op);
        EXPECT_EQ(r.nranks, nproc);
        EXPECT_EQ(r.wrong, op == "barrier" ? -1 : 0) << out.output;
        EXPECT_GT(r.time_us, 0);
        EXPECT_LE(r.time_min_us, r.time_median_us);
        EXPECT_LE(r.time_median_us, r.time_max_us);
        // The time is nccl-tests' (the slowest rank's loop / calls), kept as time_loop_us too;
        // each rank's mean call is at most the mean of each call's slowest rank.
        EXPECT_GT(r.time_loop_us, 0);
        EXPECT_DOUBLE_EQ(r.time_loop_us, r.time_us);
        EXPECT_LE(r.time_us, r.time_iter_mean_us * (1 + 1e-9));
        EXPECT_EQ(r.backend, "gloo");
      }
    }
  }
}

// The same over the shm backend, up to 1 MiB: every op through its one-round and chunked
// paths, with more ranks than this machine's two cores.
TEST(BenchEndToEnd, EveryOpIsRightOverShm) {
  const std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                        "all_to_all", "gather",     "scatter",        "send_recv", "barrier"};
  for (int nproc : {2, 4}) {
    for (const std::string& op : ops) {
      SCOPED_TRACE(op + " over shm with " + std::to_string(nproc) + " ranks");
      Outcome out;
      const std::string json = temp_path("shm_" + op + std::to_string(nproc) + ".json");
      const auto records = run_to_json({"--backend=shm", "--op=" + op, "--nproc=" + std::to_string(nproc), "-b", "8",
                                        "-e", "1M", "-f", "64", "-n", "3", "-w", "1", "-r", std::to_string(nproc - 1)},
                                       json, &out);
      ASSERT_EQ(out.exit_code, 0) << out.output;
      ASSERT_FALSE(records.empty()) << out.output;
      for (const BenchRecord& r : records) {
        EXPECT_EQ(r.wrong, op == "barrier" ? -1 : 0) << out.output;  // a barrier checks nothing
        EXPECT_EQ(r.backend, "shm");
      }
    }
  }
}

TEST(BenchEndToEnd, TableLooksLikeNcclTests) {
  const Outcome out = run_bench(with(kSmall, {"--op=all_gather", "--nproc=2", "-d", "int32"}));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("out-of-place"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("#wrong"), std::string::npos);
  EXPECT_NE(out.output.find("# Avg bus bandwidth"), std::string::npos);
  // The 4096-byte row: size, per-rank count, type, redop, root.
  EXPECT_NE(out.output.find("        4096           512     int32    none      -1"), std::string::npos)
      << out.output;
}

// A deliberately corrupted element is counted, reported, and fails the run.
TEST(BenchEndToEnd, CorruptedResultIsCountedAndFailsTheRun) {
  for (const std::vector<std::string>& op : std::vector<std::vector<std::string>>{
           {"--op=all_reduce"}, {"--op=reduce", "-r", "1"}, {"--op=all_gather"}, {"--op=scatter", "-r", "2"}}) {
    SCOPED_TRACE(op[0]);
    Outcome out;
    const auto records = run_to_json(with(with(kSmall, op), {"--nproc=3", "--corrupt_for_test"}),
                                     temp_path("corrupt.json"), &out);
    EXPECT_EQ(out.exit_code, 1) << out.output;
    ASSERT_FALSE(records.empty());
    // 8 bytes on 3 ranks leaves chunked ops no element to corrupt: those results stay right.
    int with_data = 0;
    for (const BenchRecord& r : records) {
      EXPECT_EQ(r.wrong, r.bytes > 0 ? 1 : 0) << out.output;
      with_data += r.bytes > 0;
    }
    EXPECT_GT(with_data, 0);
    EXPECT_NE(out.output.find("Out of bounds values : " + std::to_string(with_data) + " FAILED"),
              std::string::npos)
        << out.output;
  }
}

TEST(BenchEndToEnd, TypesRedopsAndVaryingData) {
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {"--op=all_reduce", "-d", "float16", "-o", "max"},
           {"--op=all_reduce", "-d", "bfloat16", "-o", "avg"},
           {"--op=reduce_scatter", "-d", "int8", "-o", "prod"},
           {"--op=all_reduce", "-d", "int64", "-o", "bxor", "-a"},
           {"--op=all_reduce", "-d", "bool", "-o", "min"},
           {"--op=all_reduce", "--data_varying", "-c", "2"}}) {
    SCOPED_TRACE(extra[0] + " " + (extra.size() > 2 ? extra[2] : ""));
    const Outcome out = run_bench(with(with(kSmall, extra), {"--nproc=3"}));
    EXPECT_EQ(out.exit_code, 0) << out.output;
    EXPECT_NE(out.output.find("Out of bounds values : 0 OK"), std::string::npos) << out.output;
  }
}

TEST(BenchEndToEnd, NoCheckPrintsNA) {
  Outcome out;
  const auto records = run_to_json(with(kSmall, {"--nproc=2", "-c", "0"}), temp_path("nocheck.json"), &out);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  for (const BenchRecord& r : records) EXPECT_EQ(r.wrong, -1);
}

TEST(BenchEndToEnd, BadInputFailsClearlyWithoutHanging) {
  Outcome out = run_bench({"-b", "64M", "-e", "8"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.output.find("larger than -e"), std::string::npos) << out.output;

  // A root outside the world --nproc makes is a bad flag, refused before any rank starts.
  out = run_bench({"--op=gather", "-r", "5", "--nproc=2", "-b", "8", "-e", "8"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.output.find("bench: -r/--root 5 is not a rank of this 2-rank job (--nproc=2)"), std::string::npos)
      << out.output;
  EXPECT_EQ(out.output.find("# distcomm bench"), std::string::npos) << "no rank may start: " << out.output;

  // Under a launcher, the world size in its environment: refused before init waits for peers.
  out = run_program({runfile("tools/bench/bench"), "--op=broadcast", "-r", "5", "-b", "8", "-e", "8"}, 120,
                    {"RANK=0", "WORLD_SIZE=3"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.output.find("-r/--root 5 is not a rank of this 3-rank job (WORLD_SIZE=3 in the environment)"),
            std::string::npos)
      << out.output;

  // A launcher's WORLD_SIZE without RANK is no rank: refused as the examples refuse it, not
  // run as a world of one.
  out = run_program({runfile("tools/bench/bench"), "-b", "8", "-e", "8"}, 120, {"WORLD_SIZE=2"});
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.output.find("the world size is 2 but the rank is unknown: set RANK"), std::string::npos) << out.output;
  EXPECT_EQ(out.output.find("# distcomm bench"), std::string::npos) << out.output;

  out = run_bench({"--op=send_recv", "-b", "8", "-e", "8"});  // one rank, no launcher
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.output.find("at least 2 ranks"), std::string::npos) << out.output;

  out = run_bench({"--backend=nosuch", "--nproc=2", "-b", "8", "-e", "8"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.output.find("bench: --backend nosuch: "), std::string::npos) << out.output;
  EXPECT_EQ(out.output.find("# distcomm bench"), std::string::npos) << "no rank may start: " << out.output;
}

// What --help promises for bad arguments (exit 2, before any rank starts), for the mistakes
// that are only found against the plugins or the file system.
TEST(BenchEndToEnd, BadBackendConfigJsonAndCheckAreRefusedBeforeSpawning) {
  Outcome out = run_bench({"--backend=gloo", "--config=no_such_key=1", "--nproc=2", "-b", "8", "-e", "8"});
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_NE(out.output.find("bench: --config: backend config key 'no_such_key'"), std::string::npos) << out.output;
  EXPECT_EQ(out.output.find("# distcomm bench"), std::string::npos) << out.output;

  out = run_bench({"--backend=gloo", "--nproc=2", "-b", "8", "-e", "8", "--json=/nonexistent_dir/x.json"});
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_NE(out.output.find("bench: --json /nonexistent_dir/x.json cannot be written"), std::string::npos)
      << out.output;
  EXPECT_EQ(out.output.find("# distcomm bench"), std::string::npos) << "checked before the sweep: " << out.output;

  out = run_bench({"--backend=gloo", "--nproc=130", "-d", "int8", "-o", "avg", "-b", "8", "-e", "8"});
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_NE(out.output.find("pass -c 0 to time it unchecked"), std::string::npos) << out.output;
}

// nccl serves only CUDA tensors, so --backend nccl benchmarks buffers on cuda:<local
// rank>. Without a GPU (the build machines) the run is refused before any rank is spawned,
// with one "no CUDA device" line, not a failure of every rank's first op; with GPUs it
// runs and checks its results on them.
TEST(BenchEndToEnd, NcclBenchmarksCudaBuffersOrSaysOnceThatThereIsNoCudaDevice) {
  const Outcome out = run_bench({"--backend=nccl", "--nproc=2", "-b", "8", "-e", "64", "-f", "8", "-n", "2",
                                 "-w", "1", "--timeout=60"});
  if (out.exit_code == 2 && out.output.find("--backend nccl") != std::string::npos) {
    GTEST_SKIP() << "this build has no nccl plugin: " << out.output;
  }
  const std::string line = "bench: no CUDA device: ";
  const size_t at = out.output.find(line);
  if (out.output.find("no CUDA device") == std::string::npos) {
    // A machine with GPUs: the sweep runs on them and every result is right.
    EXPECT_EQ(out.exit_code, 0) << out.output;
    EXPECT_NE(out.output.find("# Out of bounds values : 0 OK"), std::string::npos) << out.output;
    return;
  }
  ASSERT_NE(at, std::string::npos) << "not said before spawning: " << out.output;
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_EQ(out.output.find("no CUDA device", at + line.size()), std::string::npos)
      << "said more than once: " << out.output;
  EXPECT_NE(out.output.find("(--backend nccl benchmarks CUDA buffers)"), std::string::npos) << out.output;
  EXPECT_EQ(out.output.find("# distcomm bench"), std::string::npos) << "the sweep began: " << out.output;
  EXPECT_EQ(out.output.find("rank "), std::string::npos) << "ranks were spawned: " << out.output;
  EXPECT_EQ(out.output.find("cpu tensors"), std::string::npos) << out.output;
}

// --device cuda puts any backend's buffers on the GPU; --device cpu keeps nccl's on the
// host (for a mixed backend spec that serves both).
TEST(BenchEndToEnd, DeviceFlagChoosesWhereTheBuffersAre) {
  Outcome out = run_bench({"--backend=gloo", "--device=cuda", "--nproc=2", "-b", "8", "-e", "8"});
  if (out.output.find("bench: no CUDA device: ") != std::string::npos) {
    EXPECT_EQ(out.exit_code, 1) << out.output;
    EXPECT_NE(out.output.find("(--device cuda)"), std::string::npos) << out.output;
    EXPECT_EQ(out.output.find("# distcomm bench"), std::string::npos) << out.output;
  }
  out = run_bench(with(kSmall, {"--device=cpu", "--nproc=2"}));
  EXPECT_EQ(out.exit_code, 0) << out.output;
  out = run_bench({"--device=gpu"});
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_NE(out.output.find("--device takes auto, cpu or cuda, not 'gpu'"), std::string::npos) << out.output;
}

// A barrier runs one row whatever --sizes says, and checks nothing; an odd size rounds down
// to whole elements, and the JSON keeps the size asked for.
TEST(BenchEndToEnd, BarrierHeaderAndRequestedBytes) {
  Outcome out;
  auto records = run_to_json({"--backend=gloo", "--nproc=2", "--op=barrier", "--sizes=1000,1M", "-n", "2", "-w", "1"},
                             temp_path("barrier_sizes.json"), &out);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("# sizes: none, a barrier moves no data (one row)"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("check iters: N/A"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("# Out of bounds values : N/A"), std::string::npos) << out.output;
  EXPECT_EQ(out.output.find("1048576"), std::string::npos) << out.output;
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].wrong, -1);

  records = run_to_json({"--backend=gloo", "--nproc=2", "--sizes=1001,8", "-n", "2", "-w", "1"},
                        temp_path("odd_size.json"), &out);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].bytes, 1000);  // 250 float32
  EXPECT_EQ(records[0].requested_bytes, 1001);
  EXPECT_EQ(records[1].requested_bytes, 8);
}

// RANK and WORLD_SIZE come from distcomm-launch as much as from torchrun: the refusal of
// --nproc names the variables, not torchrun alone.
TEST(BenchEndToEnd, NprocUnderALauncherNamesNoSingleLauncher) {
  const Outcome out = run_program({runfile("tools/bench/bench"), "--nproc=2", "-b", "8", "-e", "8"}, 120,
                                  {"RANK=0", "WORLD_SIZE=1"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.output.find("bench: --nproc starts its own ranks, but this process already has a rank from a "
                            "launcher (RANK and WORLD_SIZE in its environment, as distcomm-launch (tools/launch) "
                            "and torchrun set them): drop --nproc or the launcher"),
            std::string::npos)
      << out.output;
  EXPECT_EQ(out.output.find("(torchrun)"), std::string::npos) << out.output;
}

// The "# time:" line names how the ranks' times were combined, as -a N chose.
TEST(BenchEndToEnd, TimeHeaderNamesTheAverageChoice) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "# time: slowest rank's (-a 3) loop time: each rank times its calls after a barrier"},
      {"0", "# time: rank 0's (-a 0) loop time"},
      {"1", "# time: average of the ranks' (-a 1) loop time"},
      {"2", "# time: fastest rank's (-a 2) loop time"},
      {"3", "# time: slowest rank's (-a 3) loop time"},
  };
  for (const auto& [value, line] : cases) {
    std::vector<std::string> args = {"--backend=gloo", "-b", "8", "-e", "8", "-n", "2", "-w", "0"};
    if (!value.empty()) args.insert(args.end(), {"-a", value});
    const Outcome out = run_bench(args);
    EXPECT_EQ(out.exit_code, 0) << out.output;
    EXPECT_NE(out.output.find(line), std::string::npos) << "-a " << value << ": " << out.output;
  }
}

TEST(BenchEndToEnd, OneRankWithoutALauncher) {
  const Outcome out = run_bench(with(kSmall, {"--op=all_reduce"}));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("1 ranks"), std::string::npos) << out.output;
}

// The header describes the sizes run: --sizes replaces -b/-e/-f/-i's range.
TEST(BenchEndToEnd, HeaderNamesTheSizesRun) {
  Outcome out = run_bench({"--backend=gloo", "--sizes=64,1K", "-n", "1", "-w", "0"});
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("\n# sizes: 64 1024 (bytes, in this order) warmup iters: 0 iters: 1"), std::string::npos)
      << out.output;
  EXPECT_EQ(out.output.find("minBytes"), std::string::npos) << out.output;
  out = run_bench(with(kSmall, {"--op=all_reduce"}));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("\n# minBytes 8 maxBytes 4096 step: 8(factor) warmup iters: 1"), std::string::npos)
      << out.output;
}

TEST(BenchEndToEnd, PlotsThisRunAndEarlierRuns) {
  const std::string a = temp_path("a.json"), b = temp_path("b.json");
  const std::string svg_run = temp_path("run.svg"), svg_both = temp_path("both.svg");
  Outcome out = run_bench(with(kSmall, {"--nproc=2", "--op=all_gather", "--json=" + a, "--plot=" + svg_run}));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  out = run_bench(with(kSmall, {"--nproc=3", "--op=all_gather", "--json=" + b}));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  const std::string run_svg = read_file(svg_run);
  EXPECT_NE(run_svg.find("<polyline"), std::string::npos) << run_svg;

  out = run_bench({"--plot=" + svg_both, "--plot_inputs=" + a + "," + b});
  ASSERT_EQ(out.exit_code, 0) << out.output;
  const std::string both = read_file(svg_both);
  size_t lines = 0;
  for (size_t at = both.find("class=\"series\""); at != std::string::npos; at = both.find("class=\"series\"", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(both.find("a.json: all_gather gloo 2 ranks"), std::string::npos);
  EXPECT_NE(both.find("b.json: all_gather gloo 3 ranks"), std::string::npos);

  out = run_bench({"--plot=" + svg_both, "--plot_inputs=" + temp_path("missing.json")});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.output.find("missing.json"), std::string::npos) << out.output;
}

}  // namespace
}  // namespace bench
}  // namespace distcomm
