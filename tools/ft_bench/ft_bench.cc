// ft_bench: DDP training at N ranks, one rank SIGKILLed during a chosen step, measured three
// ways side by side: surviving in-process (ft::Manager: the survivors shrink and go on, and
// optionally a replacement joins), through the launcher's restart path (every rank
// restarted from the last checkpoint), and with no failure.
//
//   bazel run -c opt //tools/ft_bench -- --nproc=4 --backend=gloo --kill_rank=2 --kill_step=20
//       [--rejoin_after_s=2] --json=/tmp/ft.json
//
// The in-process run also drives the other faults of a job (tests/ft/ft_processes_test):
//
//   --kills=rank2@10,rank1@14     several kills (member@step), in place of --kill_rank/--kill_step
//   --kill_in_recovery=rank1      a member that dies right after its first aborted step, while
//                                 the others form the next generation (rank1@arrived: once it
//                                 has arrived at that generation, while its group is created)
//   --refused_joiner_after_s=1    a joiner with another state (another width) this long after
//                                 the start: it must be refused, naming both states; the job goes on
//
// Prints a table (report.h defines each row) and writes one JSON object: the in-process
// run's figures at the top level, the others under "restart" and "no_failure".
#include <gflags/gflags.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "api/errors.h"
#include "api/run_main.h"
#include "tools/ft_bench/jobs.h"
#include "tools/ft_bench/report.h"

DEFINE_int32(nproc, 4, "ranks");
DEFINE_string(backend, "gloo", "each generation's backend (gloo, shm, auto, ...)");
DEFINE_int32(kill_rank, 2, "the rank that SIGKILLs itself (-1: nobody)");
DEFINE_int64(kill_step, 20, "during this step's backward");
DEFINE_string(kills, "",
              "in-process run: the members that SIGKILL themselves, member@step comma-separated "
              "(rank2@10,rank1@14); replaces --kill_rank/--kill_step, of which the restart run takes the first");
DEFINE_string(kill_in_recovery, "",
              "in-process run: this member (rank1) SIGKILLs itself right after its first aborted step; "
              "rank1@arrived: once it has arrived at the next generation");
DEFINE_double(rejoin_after_s, -1,
              "start a replacement of the first kill's victim this long after it died (< 0: none); the "
              "others then go on past --steps until it has taken part");
DEFINE_double(refused_joiner_after_s, -1,
              "in-process run: start a joiner with another state this long after the start (< 0: none); "
              "it must be refused");
DEFINE_int32(step_ms, 0, "in-process run: pad each step that went well to this many ms (tests: a job long enough for a joiner)");
DEFINE_bool(await_joiner, false, "internal: the worker does not stop before a replacement took part");
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

// rank0..rank<nproc-1>, or a replacement's rank<N>+1.
bool known_member(const std::string& id) {
  std::string digits = id.rfind("rank", 0) == 0 ? id.substr(4) : "";
  if (digits.size() > 2 && digits.compare(digits.size() - 2, 2, "+1") == 0) digits.resize(digits.size() - 2);
  return !digits.empty() && digits.size() < 6 && digits.find_first_not_of("0123456789") == std::string::npos &&
         std::stoi(digits) < FLAGS_nproc;
}

bool wants(const std::string& run) { return ("," + FLAGS_runs + ",").find("," + run + ",") != std::string::npos; }

WorkerConfig worker_config() {
  WorkerConfig w;
  w.shape.layers = FLAGS_layers;
  w.shape.width = FLAGS_width;
  w.shape.global_batch = FLAGS_global_batch;
  w.steps = FLAGS_steps;
  w.kill_rank = FLAGS_kill_rank;
  w.kill_step = FLAGS_kill_step;
  w.kills = parse_kills(FLAGS_kills);
  if (w.kills.empty() && FLAGS_kill_rank >= 0) w.kills.push_back({"rank" + std::to_string(FLAGS_kill_rank), FLAGS_kill_step});
  if (!FLAGS_kills.empty() && FLAGS_worker.empty()) {
    // The restart path's victim: the first kill of a first member.
    w.kill_rank = -1;
    for (const Kill& k : w.kills) {
      const std::string digits = k.member.size() > 4 ? k.member.substr(4) : "";
      if (k.member.rfind("rank", 0) == 0 && !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos) {
        w.kill_rank = std::stoi(digits);
        w.kill_step = k.step;
        break;
      }
    }
  }
  const std::string arrived = "@arrived";
  w.kill_in_recovery = FLAGS_kill_in_recovery;
  if (w.kill_in_recovery.size() > arrived.size() &&
      w.kill_in_recovery.compare(w.kill_in_recovery.size() - arrived.size(), arrived.size(), arrived) == 0) {
    w.kill_in_recovery.resize(w.kill_in_recovery.size() - arrived.size());
    w.kill_once_arrived = true;
  }
  w.await_joiner = FLAGS_await_joiner;
  w.step_ms = FLAGS_step_ms;
  w.log_dir = FLAGS_log_dir;
  w.checkpoint_every = FLAGS_checkpoint_every;
  w.heartbeat_timeout_s = FLAGS_heartbeat_timeout_s;
  return w;
}

void check_flags() {
  auto bad = [](const std::string& what) { throw distcomm::InvalidArgument("ft_bench: " + what); };
  if (FLAGS_nproc < 2) bad("--nproc must be >= 2, got " + std::to_string(FLAGS_nproc));
  if (FLAGS_kills.empty() && FLAGS_kill_rank >= FLAGS_nproc) bad("--kill_rank " + std::to_string(FLAGS_kill_rank) + " is not a rank of --nproc=" + std::to_string(FLAGS_nproc));
  if (FLAGS_steps < 4) bad("--steps must be >= 4");
  if (FLAGS_kills.empty() && FLAGS_kill_rank >= 0 && (FLAGS_kill_step < 3 || FLAGS_kill_step >= FLAGS_steps - 1)) {
    bad("--kill_step must be in [3, --steps - 1), got " + std::to_string(FLAGS_kill_step));
  }
  if (!FLAGS_kills.empty()) {
    if (!gflags::GetCommandLineFlagInfoOrDie("kill_rank").is_default ||
        !gflags::GetCommandLineFlagInfoOrDie("kill_step").is_default) {
      bad("--kills replaces --kill_rank and --kill_step: give one or the other");
    }
    const std::vector<Kill> kills = parse_kills(FLAGS_kills);
    std::set<std::string> seen;
    for (size_t i = 0; i < kills.size(); ++i) {
      const Kill& k = kills[i];
      if (!known_member(k.member)) bad("--kills: '" + k.member + "' is none of rank0..rank" + std::to_string(FLAGS_nproc - 1) + " or a replacement's id (rank<N>+1)");
      if (!seen.insert(k.member).second) bad("--kills names " + k.member + " twice");
      if (k.member.find('+') != std::string::npos && (FLAGS_rejoin_after_s < 0 || k.member != kills.front().member + "+1")) {
        bad("--kills: " + k.member + " is no replacement: --rejoin_after_s starts one, " + kills.front().member + "+1");
      }
      const int64_t least = i == 0 ? 3 : 1;
      if (k.step < least || k.step >= FLAGS_steps - 1) {
        bad("--kills: " + k.member + "@" + std::to_string(k.step) + ": the step must be in [" + std::to_string(least) +
            ", --steps - 1)");
      }
    }
  }
  const std::string recovery_victim = worker_config().kill_in_recovery;
  if (!recovery_victim.empty()) {
    if (!known_member(recovery_victim)) bad("--kill_in_recovery: '" + recovery_victim + "' is no member");
    if (worker_config().kills.empty()) bad("--kill_in_recovery needs a kill (--kills or --kill_rank) to recover from");
    for (const Kill& k : worker_config().kills) {
      if (k.member == recovery_victim) bad("--kill_in_recovery: " + recovery_victim + " is killed by --kills already");
    }
  }
  if (FLAGS_global_batch < FLAGS_nproc + 1) bad("--global_batch must exceed --nproc");
  if (FLAGS_checkpoint_every < 1) bad("--checkpoint_every must be >= 1");
  if (FLAGS_step_ms < 0 || FLAGS_step_ms > 60000) bad("--step_ms must be in [0, 60000]");
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
    config.refused_joiner_after_s = FLAGS_refused_joiner_after_s;
    config.time_limit_s = FLAGS_time_limit_s;
    // Every member that is to die: the kills' (the first is the restart path's) and the one in recovery.
    std::vector<std::string> victims;
    for (const Kill& k : config.worker.kills) victims.push_back(k.member);
    if (!config.worker.kill_in_recovery.empty()) victims.push_back(config.worker.kill_in_recovery);
    const std::vector<std::string> restart_victims =
        config.worker.kill_rank >= 0 ? std::vector<std::string>{"rank" + std::to_string(config.worker.kill_rank)}
                                     : std::vector<std::string>{};
    std::string plan;
    for (const Kill& k : config.worker.kills) {
      plan += (plan.empty() ? "" : ", ") + (k.member.rfind("rank", 0) == 0 ? "rank " + k.member.substr(4) : k.member) +
              " SIGKILLed in step " + std::to_string(k.step);
    }
    if (plan.empty()) plan = "no rank killed";
    if (!config.worker.kill_in_recovery.empty()) {
      plan += ", " + config.worker.kill_in_recovery + " in the recovery" + (config.worker.kill_once_arrived ? " (once arrived)" : "");
    }
    if (FLAGS_rejoin_after_s >= 0) plan += ", a replacement " + std::to_string(FLAGS_rejoin_after_s).substr(0, 4) + " s later";
    if (FLAGS_refused_joiner_after_s >= 0) {
      plan += ", a joiner with another state at " + std::to_string(FLAGS_refused_joiner_after_s).substr(0, 4) + " s";
    }
    std::printf("ft_bench: %d ranks over %s, %lld steps of an MLP (%d x %d, global batch %lld); %s\n", FLAGS_nproc,
                FLAGS_backend.c_str(), static_cast<long long>(FLAGS_steps), FLAGS_layers, FLAGS_width,
                static_cast<long long>(FLAGS_global_batch), plan.c_str());
    std::fflush(stdout);
    std::vector<std::pair<std::string, Metrics>> columns;
    std::string json = "{\"nproc\": " + std::to_string(FLAGS_nproc) + ", \"backend\": \"" + FLAGS_backend +
                       "\", \"kill_rank\": " + std::to_string(config.worker.kill_rank) + ", \"kill_step\": " +
                       std::to_string(config.worker.kill_step) + ", \"kill_list\": \"" + format_kills(config.worker.kills) +
                       "\", \"kill_in_recovery\": \"" + FLAGS_kill_in_recovery +
                       "\", \"rejoin_after_s\": " + std::to_string(FLAGS_rejoin_after_s) +
                       ", \"refused_joiner_after_s\": " + std::to_string(FLAGS_refused_joiner_after_s);
    bool all_ok = true;
    auto add = [&](const std::string& title, const std::string& key, const RunOutcome& run) {
      const Metrics m = measure(run, run.in_process ? victims : restart_victims);
      columns.emplace_back(title, m);
      all_ok = all_ok && run_passed(m);
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
      if (!m.params_identical_every_step) {
        std::printf("ft_bench: %s run: parameters differ after a step: %s\n", title.c_str(),
                    m.first_difference.empty() ? "no checksums were logged" : m.first_difference.c_str());
      }
      if (m.joined && !m.joined_state_identical) {
        std::printf("ft_bench: %s run: a replacement did not receive the members' state: %s\n", title.c_str(),
                    m.first_difference.c_str());
      }
      if (!m.every_step_committed) {
        std::printf("ft_bench: %s run: not every step committed: %s\n", title.c_str(),
                    m.missed.empty() ? "no process finished" : m.missed.c_str());
      }
    }
    if (FLAGS_rejoin_after_s >= 0 && wants("ft") && !config.worker.kills.empty() && !columns.front().second.joined) {
      all_ok = false;
      std::printf("ft_bench: the replacement did not take part in a step\n");
    }
    std::printf("ft_bench: %s\n", all_ok ? "done" : "FAILED (see above)");
    return all_ok ? 0 : 1;
  });
}
