// bench: distcomm's collective benchmark, in nccl-tests' language.
//
//   bench --op=all_reduce --backend=gloo --nproc=2 -b 8 -e 64M -f 4
//
// Ranks come from --nproc (started here with distcomm::spawn), or from a launcher or
// mpirun (read by init_process_group), or there is one rank. Rank 0 prints the table and
// writes --json / --plot. Exit status: 0 all right, 1 wrong values or a failed rank,
// 2 bad flags.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/group/backend_spec.h"
#include "api/group/process_environment.h"
#include "api/store/hash_store.h"
#include "api/init.h"
#include "api/run_main.h"
#include "api/plugin/plugin_registry.h"  // check_backend_config: init's own check, before spawning
#include "api/process/spawn.h"
#include "api/version.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/bench_run.h"
#include "tools/bench/cuda_buffers.h"
#include "tools/bench/svg_plot.h"

namespace distcomm {
namespace bench {
namespace {

constexpr int kExitWrong = 1;
constexpr int kExitBadFlags = 2;
const char* const kPlotTitle = "distcomm bench: bus bandwidth against message size";

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw Error("cannot write " + path);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidArgument("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// `bazel run` starts the program in its runfiles: relative paths the user typed mean the
// folder the user was in, which Bazel passes as BUILD_WORKING_DIRECTORY.
std::string user_path(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr || cwd[0] == '\0') return path;
  return std::string(cwd) + "/" + path;
}

void resolve_user_paths(BenchFlags& flags) {
  flags.json_path = user_path(flags.json_path);
  flags.plot_path = user_path(flags.plot_path);
  for (std::string& p : flags.plot_inputs) p = user_path(p);
}

// --plot with --plot_inputs: draws earlier runs, runs nothing.
int plot_inputs(const BenchFlags& flags) {
  std::vector<PlotSeries> series;
  for (const std::string& path : flags.plot_inputs) {
    series.push_back(series_from_records(records_from_json_lines(read_file(path), path), base_name(path)));
  }
  write_file(flags.plot_path, render_busbw_svg(series, kPlotTitle));
  printf("# wrote %s (%zu series)\n", flags.plot_path.c_str(), series.size());
  return 0;
}

void write_outputs(const BenchFlags& flags, const std::vector<BenchRecord>& records) {
  if (!flags.json_path.empty()) {
    std::string text;
    for (const BenchRecord& r : records) text += to_json(r) + "\n";
    write_file(flags.json_path, text);
  }
  if (!flags.plot_path.empty()) {
    const std::string name = flags.json_path.empty() ? "this run" : base_name(flags.json_path);
    write_file(flags.plot_path, render_busbw_svg({series_from_records(records, name)}, kPlotTitle));
  }
}

// --json / --plot are written after the sweep: a path that cannot be written is refused
// before anything runs, not found out minutes later. Opens for appending (nothing is lost
// if the file exists) and removes a file this check created.
void check_writable(const std::string& path, const char* flag) {
  if (path.empty()) return;
  const bool existed = access(path.c_str(), F_OK) == 0;
  FILE* f = fopen(path.c_str(), "a");
  if (f == nullptr) {
    throw InvalidArgument(std::string(flag) + " " + path + " cannot be written: " + std::strerror(errno));
  }
  fclose(f);
  if (!existed) remove(path.c_str());
}

// --backend, else $DISTCOMM_BACKEND, else auto: what init_process_group will be given.
std::string backend_given(const BenchFlags& flags) {
  const char* env = std::getenv("DISTCOMM_BACKEND");
  return !flags.backend.empty() ? flags.backend : (env != nullptr && *env ? env : "auto");
}

// The backend (--backend, else $DISTCOMM_BACKEND, else auto) and --config's keys, checked
// as init_process_group checks them, before any rank is spawned: a mistake there is a bad
// flag (exit 2), said once, not a failure of every rank.
void check_backend_and_config(const BenchFlags& flags) {
  const std::string given = backend_given(flags);
  const std::string source = !flags.backend.empty() ? "--backend " + given : "DISTCOMM_BACKEND=" + given;
  const PluginSearch search = PluginSearch::from_environment();
  BackendSpec spec;
  try {
    spec = BackendSpec::parse(given);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(source + ": " + e.what());
  }
  // The names written (auto and hier choose among what is there when the group is made).
  std::vector<std::string> named;
  if (spec.by_device.empty()) named.push_back(spec.text);
  for (const auto& entry : spec.by_device) {
    if (entry.second != "auto" && entry.second != "hier") named.push_back(entry.second);
  }
  try {
    check_backend_config(named, {}, search);  // loads each: an unknown name is refused here
  } catch (const BackendUnavailable& e) {
    throw InvalidArgument(source + ": " + e.what());
  }
  if (flags.backend_config.empty()) return;
  try {
    check_backend_config(spec.names_taking_settings(search, flags.backend_config), flags.backend_config, search);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("--config: ") + e.what());
  }
}

// For a refusal: the variable that gave the world size ("WORLD_SIZE=3 in the environment").
std::string world_size_in_environment(const std::string& source, int world_size) {
  const char* variable = source == "mpirun" ? "OMPI_COMM_WORLD_SIZE"
                         : source == "slurm" ? "SLURM_NTASKS"
                         : source == "pmi"   ? "PMI_SIZE"
                                             : "WORLD_SIZE";
  return std::string(variable) + "=" + std::to_string(world_size) + " in the environment";
}

// For a refusal: which variables gave this process its rank, and who sets them. RANK and
// WORLD_SIZE ("torchrun" as LaunchEnv names them) come from distcomm-launch, torchrun or
// spawn() alike: the message must not name torchrun to a user of distcomm-launch.
std::string launcher_in_environment(const std::string& source) {
  if (source == "mpirun") return "OMPI_COMM_WORLD_RANK in its environment, from mpirun";
  if (source == "slurm") return "SLURM_PROCID in its environment, from srun";
  if (source == "pmi") return "PMI_RANK in its environment, from a PMI launcher such as MPICH's mpiexec";
  if (source == "pmix") return "PMIX_RANK in its environment, from a PMIx launcher";
  return "RANK and WORLD_SIZE in its environment, as distcomm-launch (tools/launch) and torchrun set them";
}

// This rank's CUDA device, one per local rank as nccl-tests runs one GPU per rank (the
// nccl backend's default device is the same: its device_id setting).
int local_cuda_device() { return launched_as_rank() ? std::max(0, read_launch_env().local_rank) : 0; }

// A bench on CUDA buffers needs a device per local rank. Checked before any rank is
// spawned (or, under a launcher, by every rank before it joins the group), so that a
// machine without a GPU gets one "no CUDA device" line instead of every rank failing its
// first op after the group was made.
void check_cuda_devices(const BenchFlags& flags, int highest_local_rank) {
  if (!uses_cuda(flags, backend_given(flags))) return;
  const std::string why = flags.device == "cuda" ? "--device cuda" : "--backend " + backend_given(flags) +
                                                                         " benchmarks CUDA buffers";
  require_cuda_devices(highest_local_rank, why);
}

// One rank's whole run. Returns the number of results with wrong values (rank 0 only:
// the other ranks return 0, so that under a launcher that stops the job when one rank
// fails, rank 0 is never stopped before it has written the table and the files).
int run_rank(const BenchFlags& given_flags) {
  BenchFlags flags = given_flags;
  if (uses_cuda(flags, backend_given(flags))) flags.cuda_device = local_cuda_device();
  InitOptions opts;
  opts.backend = flags.backend;
  opts.backend_config = flags.backend_config;
  opts.timeout = std::chrono::seconds(flags.timeout_s);
  // Started by hand, without a launcher: a world of one. A launcher's environment that
  // lacks the rank (WORLD_SIZE without RANK) is not that: init_process_group refuses it,
  // as it does for the examples, instead of the bench running alone.
  if (!launched_as_rank()) {
    opts.rank = 0;
    opts.world_size = 1;
    opts.store = std::make_shared<HashStore>();
  } else if (const LaunchEnv env = read_launch_env(); env.world_size > 0) {
    // before init waits for the others
    check_root(flags, env.world_size, world_size_in_environment(env.source, env.world_size));
    check_checkable(flags, env.world_size, world_size_in_environment(env.source, env.world_size));
  }
  ProcessGroupPtr pg = init_process_group(opts);
  const std::vector<BenchRecord> records = run_sweep(*pg, flags, stdout);
  const bool rank0 = pg->rank() == 0;
  if (rank0) write_outputs(flags, records);
  pg.reset();
  destroy_process_group();
  fflush(stdout);
  return rank0 ? count_failed(records) : 0;
}

int run(const BenchFlags& flags) {
  const bool launched = launched_as_rank();
  // Rank 0 writes the files; under a launcher only it checks them (read_launch_env's rank).
  if (!launched || (flags.nproc == 0 && read_launch_env().rank == 0)) {
    check_writable(flags.json_path, "--json");
    check_writable(flags.plot_path, "--plot");
  }
  if (flags.nproc == 0) {
    if (!launched) check_backend_and_config(flags);
    check_cuda_devices(flags, local_cuda_device());
    return run_rank(flags) ? kExitWrong : 0;
  }
  if (launched) {
    throw InvalidArgument("--nproc starts its own ranks, but this process already has a rank from a launcher (" +
                          launcher_in_environment(read_launch_env().source) + "): drop --nproc or the launcher");
  }
  check_backend_and_config(flags);
  check_cuda_devices(flags, flags.nproc - 1);
  SpawnOptions spawn_options;
  // Empty: the ranks inherit DISTCOMM_BACKEND, else init_process_group's default (auto).
  spawn_options.backend = flags.backend;
  fflush(stdout);  // children inherit the buffer otherwise
  spawn(flags.nproc, [&](int, int) {
    const int failed = run_rank(flags);
    if (failed > 0) throw Error(std::to_string(failed) + " result(s) had wrong values");
  }, spawn_options);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace distcomm

int main(int argc, char** argv) {
  using namespace distcomm;
  using namespace distcomm::bench;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  BenchFlags flags;
  try {
    flags = parse_bench_flags(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const Error& e) {
    fprintf(stderr, "bench: %s\n", e.what());
    return kExitBadFlags;
  }
  if (flags.help) {
    fputs(bench_usage(argv[0]).c_str(), stdout);
    return 0;
  }
  if (flags.version) {
    printf("bench (distcomm) %s\n", DISTCOMM_VERSION);
    return 0;
  }
  resolve_user_paths(flags);
  // Any other failure: "bench: <message>", exit status 1 (kExitWrong), and the launcher's
  // error file when there is one.
  return run_main("bench", [&] {
    try {
      return flags.plot_inputs.empty() ? run(flags) : plot_inputs(flags);
    } catch (const InvalidArgument& e) {
      fprintf(stderr, "bench: %s\n", e.what());
      return kExitBadFlags;
    }
  });
}
