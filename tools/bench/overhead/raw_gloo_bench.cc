// raw_gloo_bench: gloo's own collectives, standalone, as the yardstick for distcomm's gloo
// plugin. Nothing of distcomm is linked in; ranks are forked here and meet through a gloo
// FileStore in a fresh temporary directory.
//
//   bazel build -c opt //tools/bench/overhead:raw_gloo_bench
//   bazel-bin/tools/bench/overhead/raw_gloo_bench --nproc=2 [--op=all_reduce|broadcast|all_gather|reduce_scatter]
//       [--algorithm=ring|bcube] [--sizes=8,64K,1M] [--iters=200] [--large_iters=20] [--warmup=5]
//
// Prints one line per size (timed_loop.h's format): the median and mean over iterations of
// the slowest rank's time, busbw from the median (nccl-tests' factors, GB = 1e9 B), and CPU
// time and context switches per op of a rank's whole process.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/bench/overhead/fork_ranks.h"
#include "tools/bench/overhead/raw_gloo_job.h"

int main(int argc, char** argv) {
  using namespace distcomm::bench;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  JobSpec spec;
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    spec = parse_job_spec(args);
    if (!args.empty()) throw std::invalid_argument("unknown argument '" + args[0] + "'");
  } catch (const std::exception& e) {
    fprintf(stderr, "raw_gloo_bench: %s\n", e.what());
    return 2;
  }
  char dir[] = "/tmp/raw_gloo_bench.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("raw_gloo_bench: mkdtemp");
    return 1;
  }
  printf("# raw gloo (no distcomm): %s, %d ranks, float32%s, algorithm %s\n", spec.op.c_str(), spec.nproc,
         spec.op == "all_reduce" || spec.op == "reduce_scatter" ? " sum" : "",
         spec.op == "all_reduce" ? spec.algorithm.c_str() : "-");
  const bool ok = fork_ranks(spec.nproc, "raw_gloo_bench", [&](int rank) {
    for (const SizeResult& r : run_raw_gloo_rank(rank, dir, spec)) printf("%s\n", format_result(r).c_str());
  });
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  printf(ok ? "# raw_gloo_bench: done\n" : "# raw_gloo_bench: FAILED (see the rank's message above)\n");
  return ok ? 0 : 1;
}
