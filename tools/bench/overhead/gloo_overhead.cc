// gloo_overhead: the cost of distcomm's layer over calling gloo directly.
//
//   bazel build -c opt //tools/bench/overhead:gloo_overhead
//   bazel-bin/tools/bench/overhead/gloo_overhead --nproc=2 [--op=all_reduce|broadcast|all_gather|reduce_scatter]
//       [--algorithm=ring|bcube] [--distcomm_algorithm=auto|ring|bcube|...] [--rounds=3] [--sizes=8,64K,1M]
//       [--iters=200] [--large_iters=20] [--warmup=5] [--only=distcomm]
//
// Separate jobs: each round starts the ranks twice from this process, once running gloo's
// own call on a context of their own with nothing of distcomm in the process
// (raw_gloo_job.h), once running ProcessGroup's op with .wait() over the gloo plugin
// (distcomm_gloo_job.h); which goes first alternates. Both time the same loop
// (timed_loop.h). A gloo call made inside a distcomm process would share the cores with
// distcomm's threads and be slowed with them, which flatters the layer. --algorithm is
// gloo::allreduce's algorithm for the raw side; distcomm uses the same one unless
// --distcomm_algorithm says otherwise ("auto" checks the plugin's own choice). --only=distcomm
// runs the distcomm job alone (once per round) and prints its result lines, for profiling
// and for scripts that alternate it with other programs.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/process/local_processes.h"
#include "tools/bench/overhead/distcomm_gloo_job.h"
#include "tools/bench/overhead/fork_ranks.h"
#include "tools/bench/overhead/raw_gloo_job.h"

namespace distcomm {
namespace bench {
namespace {

struct Flags {
  JobSpec spec;
  int rounds = 3;
  std::string distcomm_algorithm;  // "" : --algorithm
  bool only_distcomm = false;
};

Flags parse_flags(std::vector<std::string> args) {
  Flags f;
  f.spec = parse_job_spec(args);
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (name == "--rounds") {
      f.rounds = std::stoi(value);
      if (f.rounds < 1) throw std::invalid_argument("--rounds expects a positive integer, got '" + value + "'");
    } else if (name == "--only" && value == "distcomm") {
      f.only_distcomm = true;
    } else if (name == "--distcomm_algorithm" && !value.empty()) {
      f.distcomm_algorithm = value;  // the plugin checks the name
    } else {
      throw std::invalid_argument("unknown argument '" + arg + "' (see the comment at the top of gloo_overhead.cc)");
    }
  }
  if (f.distcomm_algorithm.empty()) f.distcomm_algorithm = f.spec.algorithm;
  return f;
}

// One job: the ranks are forked here; rank 0 leaves its result lines in a file.
std::vector<SizeResult> run_job(bool raw, const Flags& flags) {
  char file[] = "/tmp/gloo_overhead_results.XXXXXX";
  char dir[] = "/tmp/gloo_overhead_store.XXXXXX";
  const int fd = mkstemp(file);
  if (fd < 0 || !mkdtemp(dir)) throw std::runtime_error("cannot create temporary files in /tmp");
  ::close(fd);
  DistcommJobOptions options;
  options.port = local::pick_free_port();
  options.identity = new_job_identity();
  options.algorithm = flags.distcomm_algorithm;
  const bool ok = fork_ranks(flags.spec.nproc, raw ? "gloo_overhead (raw gloo job)" : "gloo_overhead (distcomm job)",
                             [&](int rank) {
                               const auto results = raw ? run_raw_gloo_rank(rank, dir, flags.spec)
                                                        : run_distcomm_rank(rank, flags.spec, options);
                               if (rank != 0) return;
                               std::ofstream out(file);
                               for (const SizeResult& r : results) out << format_result(r) << "\n";
                             });
  std::vector<SizeResult> results;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) results.push_back(parse_result(line));
  std::error_code ignored;
  std::filesystem::remove(file, ignored);
  std::filesystem::remove_all(dir, ignored);
  if (!ok || results.size() != flags.spec.sizes.size()) {
    throw std::runtime_error(std::string(raw ? "the raw gloo" : "the distcomm") + " job failed (see above)");
  }
  return results;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Each column: the median over rounds of the jobs' figures at that size.
SizeResult median_over_rounds(const std::vector<std::vector<SizeResult>>& rounds, size_t size_index) {
  SizeResult m = rounds[0][size_index];
  auto column = [&](double SizeResult::*field) {
    std::vector<double> v;
    for (const auto& round : rounds) v.push_back(round[size_index].*field);
    return median(v);
  };
  m.median_us = column(&SizeResult::median_us);
  m.mean_us = column(&SizeResult::mean_us);
  m.busbw = column(&SizeResult::busbw);
  m.cpu_us_per_op = column(&SizeResult::cpu_us_per_op);
  m.switches_per_op = column(&SizeResult::switches_per_op);
  return m;
}

// The aims: from 1 MiB at least 95% of gloo's busbw; at 8 B at most 10% or 20 us (the
// larger) more latency.
std::string verdict(const SizeResult& raw, const SizeResult& layer) {
  const double ratio = layer.median_us > 0 ? raw.median_us / layer.median_us : 0;
  if (raw.bytes >= (1 << 20)) return ratio >= 0.95 ? "met (busbw >= 95%)" : "MISSED (busbw < 95%)";
  if (raw.bytes > 8) return "-";
  const double allowed = std::max(20.0, 0.1 * raw.median_us);
  char text[64];
  snprintf(text, sizeof(text), layer.median_us - raw.median_us <= allowed ? "met (<= %.0f us more)" : "MISSED (> %.0f us more)",
           allowed);
  return text;
}

void print_table(const Flags& flags, const std::vector<std::vector<SizeResult>>& raw,
                 const std::vector<std::vector<SizeResult>>& layer) {
  const JobSpec& s = flags.spec;
  printf("# distcomm %s (gloo plugin%s) vs gloo called directly%s, %d ranks, float32\n", s.op.c_str(),
         s.op == "all_reduce" ? (", algorithm " + flags.distcomm_algorithm).c_str() : "",
         s.op == "all_reduce" ? (" (gloo::allreduce " + s.algorithm + ")").c_str() : "", s.nproc);
  printf("# separate jobs, %d alternating rounds; per job: median over iterations of the slowest rank's time;\n"
         "# columns: median over rounds. cpu: CPU time of a rank's process per op (all its threads), sw: its\n"
         "# context switches per op. busbw: nccl-tests' factor, GB = 1e9 B\n",
         flags.rounds);
  printf("#       size    gloo(us)  distcomm(us)  extra(us)  gloo busbw  distcomm busbw  ratio  gloo cpu  dc cpu  gloo sw  dc sw  aim\n");
  for (size_t i = 0; i < s.sizes.size(); ++i) {
    const SizeResult r = median_over_rounds(raw, i), d = median_over_rounds(layer, i);
    printf("%12lld  %10.1f  %12.1f  %9.1f  %10.3f  %14.3f  %5.2f  %8.1f  %6.1f  %7.2f  %5.2f  %s\n",
           static_cast<long long>(r.bytes), r.median_us, d.median_us, d.median_us - r.median_us, r.busbw, d.busbw,
           d.median_us > 0 ? r.median_us / d.median_us : 0, r.cpu_us_per_op, d.cpu_us_per_op, r.switches_per_op,
           d.switches_per_op, verdict(r, d).c_str());
  }
}

}  // namespace
}  // namespace bench
}  // namespace distcomm

int main(int argc, char** argv) {
  using namespace distcomm::bench;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Flags flags;
  try {
    flags = parse_flags(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    fprintf(stderr, "gloo_overhead: %s\n", e.what());
    return 2;
  }
  try {
    std::vector<std::vector<SizeResult>> raw, layer;
    if (flags.only_distcomm) {
      for (int round = 0; round < flags.rounds; ++round) {
        for (const SizeResult& r : run_job(false, flags)) printf("%s\n", format_result(r).c_str());
      }
      printf("# gloo_overhead: done\n");
      return 0;
    }
    for (int round = 0; round < flags.rounds; ++round) {
      const bool raw_first = round % 2 == 0;
      for (int k = 0; k < 2; ++k) {
        const bool is_raw = (k == 0) == raw_first;
        (is_raw ? raw : layer).push_back(run_job(is_raw, flags));
      }
    }
    print_table(flags, raw, layer);
    printf("# gloo_overhead: done\n");
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "gloo_overhead: %s\n", e.what());
    return 1;
  }
}
