// ft_bench: DDP training at N ranks, one rank SIGKILLed during a chosen step, measured three
// ways side by side: surviving in-process (ft::Manager: the survivors shrink and go on, and
// optionally a replacement joins), through the launcher's restart path (every rank
// restarted from the last checkpoint), and with no failure.
//
//   bazel run -c opt //tools/ft_bench -- --nproc=4 --backend=gloo --kill_rank=2 --kill_step=20 \
//       [--rejoin_after_s=2] --json=/tmp/ft.json
//
// Prints a table (report.h defines each row) and writes one JSON object: the in-process
// run's figures at the top level, the others under "restart" and "no_failure".
#include <gflags/gflags.h>

#include <cstdio>
#include <fstream>

#include "api/errors.h"
#include "api/run_main.h"
#include "tools/ft_bench/jobs.h"
#include "tools/ft_bench/report.h"

DEFINE_int32(nproc, 4, "ranks");
DEFINE_string(backend, "gloo", "each generation's backend (gloo, shm, auto, ...)");
DEFINE_int32(kill_rank, 2, "the rank that SIGKILLs itself (-1: nobody)");
DEFINE_int64(kill_step, 20, "during this step's backward");
DEFINE_double(rejoin_after_s, -1, "start a replacement this long after the kill (< 0: none)");
DEFINE_int64(steps, 100, "steps to train (enough that a replacement started after --rejoin_after_s still finds the job running)");
DEFINE_int32(layers, 4, "hidden layers of the MLP");
DEFINE_int32(width, 256, "their width");
DEFINE_int64(global_batch, 64, "samples per step over all ranks");
DEFINE_int64(checkpoint_every, 10, "the restart path's checkpoint interval, in steps");
DEFINE_double(heartbeat_timeout_s, 3, "ft::Manager's heartbeat timeout");
DEFINE_string(runs, "ft,restart,none", "which runs: ft (in-process), restart, none (no failure)");
DEFINE_string(json, "", "write the JSON object here");
DEFINE_double(time_limit_s, 300, "stop a run that takes longer");
DEFINE_string(worker, "", "internal: ft or restart, to run as one of the bench's workers");
DEFINE_string(log_dir, "", "internal: the worker's event log folder");

namespace {

using namespace distcomm::ft_bench;

bool wants(const std::string& run) { return ("," + FLAGS_runs + ",").find("," + run + ",") != std::string::npos; }

WorkerConfig worker_config() {
  WorkerConfig w;
  w.shape.layers = FLAGS_layers;
  w.shape.width = FLAGS_width;
  w.shape.global_batch = FLAGS_global_batch;
  w.steps = FLAGS_steps;
  w.kill_rank = FLAGS_kill_rank;
  w.kill_step = FLAGS_kill_step;
  w.log_dir = FLAGS_log_dir;
  w.checkpoint_every = FLAGS_checkpoint_every;
  w.heartbeat_timeout_s = FLAGS_heartbeat_timeout_s;
  return w;
}

void check_flags() {
  auto bad = [](const std::string& what) { throw distcomm::InvalidArgument("ft_bench: " + what); };
  if (FLAGS_nproc < 2) bad("--nproc must be >= 2, got " + std::to_string(FLAGS_nproc));
  if (FLAGS_kill_rank >= FLAGS_nproc) bad("--kill_rank " + std::to_string(FLAGS_kill_rank) + " is not a rank of --nproc=" + std::to_string(FLAGS_nproc));
  if (FLAGS_steps < 4) bad("--steps must be >= 4");
  if (FLAGS_kill_rank >= 0 && (FLAGS_kill_step < 3 || FLAGS_kill_step >= FLAGS_steps - 1)) {
    bad("--kill_step must be in [3, --steps - 1), got " + std::to_string(FLAGS_kill_step));
  }
  if (FLAGS_global_batch < FLAGS_nproc + 1) bad("--global_batch must exceed --nproc");
  if (FLAGS_checkpoint_every < 1) bad("--checkpoint_every must be >= 1");
  if (FLAGS_runs.empty() || (!wants("ft") && !wants("restart") && !wants("none"))) bad("--runs names none of ft, restart, none");
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_worker == "ft") return distcomm::run_main("ft_bench worker", [] { return run_ft_worker(worker_config()); });
  if (FLAGS_worker == "restart") {
    return distcomm::run_main("ft_bench worker", [] { return run_restart_worker(worker_config()); });
  }
  return distcomm::run_main("ft_bench", [] {
    if (!FLAGS_worker.empty()) throw distcomm::InvalidArgument("--worker must be ft or restart");
    check_flags();
    BenchConfig config;
    config.nproc = FLAGS_nproc;
    config.backend = FLAGS_backend;
    config.worker = worker_config();
    config.rejoin_after_s = FLAGS_rejoin_after_s;
    config.time_limit_s = FLAGS_time_limit_s;
    const std::string victim = FLAGS_kill_rank >= 0 ? "rank" + std::to_string(FLAGS_kill_rank) : "";
    std::printf("ft_bench: %d ranks over %s, %lld steps of an MLP (%d x %d, global batch %lld); %s\n", FLAGS_nproc,
                FLAGS_backend.c_str(), static_cast<long long>(FLAGS_steps), FLAGS_layers, FLAGS_width,
                static_cast<long long>(FLAGS_global_batch),
                FLAGS_kill_rank < 0 ? "no rank killed"
                                    : ("rank " + std::to_string(FLAGS_kill_rank) + " SIGKILLed in step " +
                                       std::to_string(FLAGS_kill_step) +
                                       (FLAGS_rejoin_after_s >= 0 ? ", a replacement " + std::to_string(FLAGS_rejoin_after_s).substr(0, 4) + " s later" : ""))
                                          .c_str());
    std::fflush(stdout);
    std::vector<std::pair<std::string, Metrics>> columns;
    std::string json = "{\"nproc\": " + std::to_string(FLAGS_nproc) + ", \"backend\": \"" + FLAGS_backend +
                       "\", \"kill_rank\": " + std::to_string(FLAGS_kill_rank) + ", \"kill_step\": " +
                       std::to_string(FLAGS_kill_step) + ", \"rejoin_after_s\": " + std::to_string(FLAGS_rejoin_after_s);
    bool all_ok = true;
    auto add = [&](const std::string& title, const std::string& key, const RunOutcome& run) {
      const Metrics m = measure(run, victim);
      columns.emplace_back(title, m);
      all_ok = all_ok && m.ok && m.params_identical;
      if (key.empty()) {
        const std::string inner = metrics_json(m);
        json += ", " + inner.substr(1, inner.size() - 2);
      } else {
        json += ", \"" + key + "\": " + metrics_json(m);
      }
    };
    if (wants("ft")) add("in-process (ft)", "", run_ft_job(config, "ft", /*with_failure=*/true));
    if (wants("restart")) add("restart (launcher)", "restart", run_restart_job(config));
    if (wants("none")) add("no failure", "no_failure", run_ft_job(config, "none", /*with_failure=*/false));
    json += "}";
    std::printf("%s", metrics_table(columns).c_str());
    if (!FLAGS_json.empty()) {
      std::ofstream out(FLAGS_json);
      out << json << "\n";
      if (!out) throw distcomm::Error("ft_bench: cannot write --json " + FLAGS_json);
    }
    for (const auto& [title, m] : columns) {
      if (!m.ok) std::printf("ft_bench: %s run failed: %s\n", title.c_str(), m.error.c_str());
    }
    if (FLAGS_rejoin_after_s >= 0 && wants("ft") && !columns.front().second.joined) {
      all_ok = false;
      std::printf("ft_bench: the replacement did not take part: the training ended before it joined (raise --steps)\n");
    }
    std::printf("ft_bench: %s\n", all_ok ? "done" : "FAILED (see above)");
    return all_ok ? 0 : 1;
  });
}
