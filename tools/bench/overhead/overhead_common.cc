#include "tools/bench/overhead/overhead_common.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "api/errors.h"
#include "api/init.h"
#include "api/run_main.h"
#include "api/process/spawn.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/bench_op.h"
#include "tools/bench/bench_run.h"

namespace distcomm {
namespace bench {
namespace {

int positive(const std::string& flag, const std::string& value) {
  try {
    size_t used = 0;
    const int v = std::stoi(value, &used);
    if (used == value.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(flag + " expects a positive integer, got '" + value + "'");
}

}  // namespace

OverheadFlags parse_overhead_flags(const std::vector<std::string>& args) {
  OverheadFlags f;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (name == "--nproc") f.nproc = positive(name, value);
    else if (name == "--iters") f.iters = positive(name, value);
    else if (name == "--rounds") f.rounds = positive(name, value);
    else if (name == "--warmup") f.warmup = positive(name, value);
    else if (name == "--algorithm" && !value.empty()) f.algorithm = value;
    else if (name == "--sizes") {
      f.sizes.clear();
      size_t start = 0;
      while (start <= value.size()) {
        const size_t comma = value.find(',', start);
        f.sizes.push_back(parse_size(value.substr(start, comma - start), "--sizes"));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      throw InvalidArgument("unknown argument '" + arg +
                            "': expected --nproc=, --iters=, --rounds=, --warmup=, --algorithm=, --sizes=");
    }
  }
  return f;
}

OverheadRow measure_side_by_side(ProcessGroup& pg, int64_t bytes, const OverheadFlags& flags,
                                 const std::function<void()>& direct, const std::function<void()>& layer) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < flags.warmup; ++i) {
    direct();
    layer();
  }
  std::vector<double> direct_us, layer_us;
  auto block = [&](const std::function<void()>& fn, std::vector<double>& out) {
    fn();  // untimed: lines the ranks up after the other kind's block
    for (int i = 0; i < flags.iters; ++i) {
      const auto start = Clock::now();
      fn();
      out.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    // Let helper threads that spin for a while after an op (the mpi plugin's poller, MPI's
    // progress) go idle before the other kind runs.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  for (int round = 0; round < flags.rounds; ++round) {
    // Alternate which kind goes first, so neither always follows the other.
    if (round % 2 == 0) {
      block(direct, direct_us);
      block(layer, layer_us);
    } else {
      block(layer, layer_us);
      block(direct, direct_us);
    }
  }
  const int samples = flags.iters * flags.rounds;
  OverheadRow row;
  row.bytes = bytes;
  row.direct = summarize_times(gather_times(pg, direct_us), pg.size(), samples, RankTime::kMax);
  row.layer = summarize_times(gather_times(pg, layer_us), pg.size(), samples, RankTime::kMax);
  return row;
}

std::string overhead_header(const std::string& title, const OverheadFlags& flags) {
  return "# " + title + "\n# " + std::to_string(flags.rounds) + " alternating rounds x " +
         std::to_string(flags.iters) +
         " iterations of each; time: median over iterations of the slowest rank; "
         "busbw = 2(n-1)/n * size / time, GB = 1e9 B\n"
         "#       size   direct(us)  distcomm(us)  extra(us)  direct busbw  distcomm busbw  busbw ratio  aim\n";
}

std::string overhead_row(const OverheadRow& row, int nranks, const LatencyAllowance& allowance) {
  const double factor = bus_factor(BenchOp::kAllReduce, nranks);
  const double direct_us = row.direct.median_us, layer_us = row.layer.median_us;
  const double direct_bw = gigabytes_per_second(row.bytes, direct_us) * factor;
  const double layer_bw = gigabytes_per_second(row.bytes, layer_us) * factor;
  const double ratio = layer_us > 0 ? direct_us / layer_us : 0;  // = layer_bw / direct_bw
  std::string verdict = "-";
  if (row.bytes >= (1 << 20)) {
    verdict = ratio >= 0.95 ? "met (busbw >= 95%)" : "MISSED (busbw < 95%)";
  } else if (row.bytes <= 8) {
    const double allowed = allowance(direct_us);
    char text[64];
    snprintf(text, sizeof(text), layer_us - direct_us <= allowed ? "met (<= %.2f us more)" : "MISSED (> %.2f us more)",
             allowed);
    verdict = text;
  }
  char buf[256];
  snprintf(buf, sizeof(buf), "%12lld  %11.2f  %12.2f  %9.2f  %12.3f  %14.3f  %11.3f  %s\n",
           static_cast<long long>(row.bytes), direct_us, layer_us, layer_us - direct_us, direct_bw, layer_bw,
           ratio, verdict.c_str());
  return buf;
}

void run_overhead_sweep(ProcessGroup& pg, const OverheadFlags& flags, const std::string& title,
                        const DirectAllReduce& direct, const LatencyAllowance& allowance) {
  if (pg.rank() == 0) printf("%s", overhead_header(title, flags).c_str());
  for (int64_t bytes : flags.sizes) {
    const int64_t count = bytes / 4;
    // Zeros: a sum of zeros stays zero, so repeated in-place reductions cannot overflow.
    Tensor direct_buf = Tensor::zeros({count}, DType::kFloat32);
    Tensor layer_buf = Tensor::zeros({count}, DType::kFloat32);
    float* direct_data = direct_buf.data_as<float>();
    const OverheadRow row = measure_side_by_side(
        pg, bytes, flags, [&] { direct(direct_data, count); }, [&] { pg.all_reduce(layer_buf)->wait(); });
    if (pg.rank() == 0) {
      printf("%s", overhead_row(row, pg.size(), allowance).c_str());
      fflush(stdout);
    }
  }
}

int overhead_main(int argc, char** argv, const std::string& name, bool needs_mpirun,
                  const std::function<void(const OverheadFlags&)>& run_rank) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return run_main(name, [&] {
    const OverheadFlags flags = parse_overhead_flags(std::vector<std::string>(argv + 1, argv + argc));
    const std::string launcher = read_launch_env().source;
    if (needs_mpirun && launcher != "mpirun") {
      throw InvalidArgument("run under mpirun, e.g. mpirun -np 2 " + std::string(argv[0]));
    }
    if (!launcher.empty()) {
      run_rank(flags);
    } else {
      spawn(flags.nproc, [&](int, int) { run_rank(flags); });
    }
    return 0;
  });
}

}  // namespace bench
}  // namespace distcomm
