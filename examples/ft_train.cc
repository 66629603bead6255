// ft_train: DDP training that goes on when a rank dies, and takes in a replacement.
//
//   bazel run //examples:ft_train -- --nproc=4 --kill_rank=2 --kill_step=30 --replace_after_s=1
//
// Run by hand it launches its own ranks as `tools/launch --on_failure=continue
// --replace_after_s=1` would (the store served by the launcher, the others left running when
// one dies, a replacement started after --replace_after_s); under tools/launch it is one rank.
//
// Each step runs under distcomm::ft::Manager (ft/manager.h): the step's group comes from
// begin_step, DDP is rebuilt when the group changed, each member takes its share of the
// step's global batch (ft::shard, so the batch is re-sharded over whoever is there), and
// the update is applied only when commit() says every member finished the step. Rank
// --kill_rank (and each of --kill_ranks) SIGKILLs itself during step --kill_step's backward
// (or stops, --kill_signal=STOP, and the launcher kills it once the others have taken it for
// gone); the others form a group
// without it (within a second of a death; a stop takes the heartbeat timeout) and redo that step; the replacement the launcher starts
// (--replace_after_s) joins at a step boundary and gets the weights from a member first. With
// --kill_rank given and a replacement coming (run by hand: unless --replace_after_s < 0; under
// tools/launch: when --replace_after_s is typed), the others train on past --steps until it has
// joined (--await_replacement; at most 10x --steps, then they end without it and say so).
// At the end every member checks that its weights equal the others' bit for bit.
//
// The model code is nn/: example code, not part of distcomm.
#include <gflags/gflags.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <distcomm/api/errors.h>
#include <distcomm/api/init.h>
#include <distcomm/api/logging.h>
#include <distcomm/api/run_main.h>
#include <distcomm/ddp/distributed_data_parallel.h>
#include "examples/nn/loss.h"
#include "examples/nn/sequential.h"
#include "examples/nn/sgd.h"
#include "examples/nn/synthetic_data.h"
#include "examples/self_launch.h"
#include "ft/manager.h"

DEFINE_int32(steps, 300, "steps to train");
DEFINE_int32(batch, 128, "samples per step over all members (each takes its share)");
DEFINE_int32(hidden, 128, "width of the two hidden layers");
DEFINE_double(lr, 0.05, "SGD learning rate");
DEFINE_int32(kill_rank, -1, "this rank SIGKILLs itself (a first member, not a replacement); -1: none");
DEFINE_string(kill_ranks, "",
              "ranks that fail as --kill_rank does, in the same step, all at once: '1,2,3' (a machine of several "
              "ranks lost together)");
DEFINE_int32(kill_step, 30, "during this step's backward");
DEFINE_string(kill_signal, "KILL",
              "how --kill_rank fails: KILL (it dies), or STOP (it stops, as a hung machine would: the others take it "
              "for gone after the heartbeat timeout, and its launcher kills it)");
DEFINE_int32(min_members, 2, "stop when fewer members are left");
DEFINE_double(recovery_timeout_s, 60,
              "how long forming a generation after a failure may take, and how long a member none of whose "
              "heartbeats reaches the job's store waits for it before it ends");
DEFINE_int32(log_every, 10, "print the loss every N steps");
DEFINE_bool(await_replacement, false,
            "past --steps, train on (up to 10x --steps) until a step is committed by as many members as the job "
            "started with, so that a replacement joins before the others end; on by default with --kill_rank when "
            "run by hand (unless --replace_after_s < 0), and under tools/launch when --replace_after_s >= 0 is typed "
            "(that launcher does not tell its ranks whether it replaces them: pass it)");
DEFINE_double(replace_after_s, 1, "run by hand: start a replacement for a failed rank this long after (< 0: none)");
DECLARE_int32(nproc);
DECLARE_string(backend);

namespace {

using distcomm::Tensor;
namespace ddp = distcomm::ddp;
namespace ft = distcomm::ft;

constexpr int64_t kFeatures = 16, kClasses = 4, kSamples = 4096;

}  // namespace

int main(int argc, char** argv) {
  gflags::SetCommandLineOptionWithMode("nproc", "4", gflags::SET_FLAGS_DEFAULT);
  distcomm::examples::print_help_if_asked(argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/false);  // the copies get them all
  if (!distcomm::launched_as_rank()) {
    distcomm::examples::FaultTolerantLaunch ft_launch;
    ft_launch.replace_after_s = FLAGS_replace_after_s;
    // Run by hand, this launcher replaces a failed rank even where --replace_after_s was not
    // typed (its default): the copies get it typed, so that they await the replacement as they
    // do when it is typed (below). Under tools/launch the default means nothing: that launcher
    // replaces only when told to, and its ranks cannot know.
    std::vector<std::string> args(argv, argv + argc);
    args.push_back("--replace_after_s=" + std::to_string(FLAGS_replace_after_s));
    std::vector<char*> copy_argv;
    for (std::string& a : args) copy_argv.push_back(a.data());
    copy_argv.push_back(nullptr);
    return distcomm::examples::launch_copies_of_self(static_cast<int>(args.size()), copy_argv.data(), FLAGS_nproc,
                                                     FLAGS_backend, ft_launch);
  }
  return distcomm::run_main("ft_train", [&] {
    auto model = nn::make_mlp({kFeatures, FLAGS_hidden, FLAGS_hidden, kClasses}, /*seed=*/1);
    nn::Sgd sgd(model->parameters(), static_cast<float>(FLAGS_lr));
    std::vector<ddp::NamedParameter> params;
    std::vector<Tensor*> state;  // what a joiner receives: here the weights (SGD keeps no state)
    for (nn::Parameter* p : model->parameters()) {
      params.push_back({p->name, &p->value, &p->grad});
      state.push_back(&p->value);
    }
    ft::ManagerOptions options;
    options.backend = FLAGS_backend;
    options.min_members = FLAGS_min_members;
    if (!(FLAGS_recovery_timeout_s > 0)) {
      throw distcomm::InvalidArgument("--recovery_timeout_s=" + std::to_string(FLAGS_recovery_timeout_s) +
                                      ": expected a positive number of seconds");
    }
    options.recovery_timeout = std::chrono::milliseconds(static_cast<int64_t>(FLAGS_recovery_timeout_s * 1000));
    options.state_signature = "mlp " + std::to_string(kFeatures) + "-" + std::to_string(FLAGS_hidden) + "-" +
                              std::to_string(FLAGS_hidden) + "-" + std::to_string(kClasses) + ", sgd";
    ft::Manager manager(options);
    bool victim = FLAGS_kill_rank >= 0 && manager.id() == "rank" + std::to_string(FLAGS_kill_rank);
    std::istringstream kill_ranks(FLAGS_kill_ranks);
    for (std::string r; std::getline(kill_ranks, r, ',');) {
      victim = victim || (!r.empty() && manager.id() == "rank" + r);
    }
    const bool kills = FLAGS_kill_rank >= 0 || !FLAGS_kill_ranks.empty();
    if (FLAGS_kill_signal != "KILL" && FLAGS_kill_signal != "STOP") {
      throw distcomm::InvalidArgument("--kill_signal=" + FLAGS_kill_signal + ": expected KILL or STOP");
    }
    const int kill_signal = FLAGS_kill_signal == "KILL" ? SIGKILL : SIGSTOP;
    const nn::Dataset data = nn::make_blobs(kSamples, kFeatures, kClasses, /*seed=*/2024);

    std::unique_ptr<ddp::DistributedDataParallel> ddp_model;
    double loss_sum = 0;
    int loss_steps = 0;
    // Every member of a generation sees the same size at the same step, so they all stop
    // together (a member that stopped alone would be taken for gone by the others).
    const char* world = std::getenv("WORLD_SIZE");  // the first generation's size (the launcher's)
    const int started_with = world ? std::atoi(world) : 0;
    // With a rank killed and a replacement asked for, the replacement is due --replace_after_s
    // after the death, and a fast machine finishes --steps before that: the survivors would end
    // without it (and the launcher report the killed rank as the job's failure). So then they
    // wait for it by default. Every member has the same command line, so decides the same.
    const auto flag_given = [](const char* name) { return !gflags::GetCommandLineFlagInfoOrDie(name).is_default; };
    const bool replacement_asked = flag_given("replace_after_s") && FLAGS_replace_after_s >= 0;
    const bool await_replacement =
        flag_given("await_replacement") ? FLAGS_await_replacement : kills && replacement_asked;
    const uint64_t await_limit = 10 * static_cast<uint64_t>(std::max(FLAGS_steps, 1));
    bool full_step_committed = false;
    int last_group_rank = 0, last_group_size = 0;
    auto trained_enough = [&] {
      const uint64_t steps = manager.committed_steps();
      if (steps < static_cast<uint64_t>(FLAGS_steps)) return false;
      return !await_replacement || full_step_committed || steps >= await_limit;
    };
    while (!trained_enough()) {
      distcomm::ProcessGroupPtr pg = manager.begin_step(state);
      if (!pg) {  // a replacement that came after the training had finished
        std::printf("%s: the training had finished before it could join\n", manager.id().c_str());
        return 0;
      }
      const int64_t step = static_cast<int64_t>(manager.committed_steps());
      // The manager says on its rank 0 when a generation begins: who joined, who left, why.
      double loss_value = 0;
      try {
        if (manager.group_changed() || !ddp_model) {
          ddp_model.reset();
          ddp_model = std::make_unique<ddp::DistributedDataParallel>(*pg, params);
        }
        const auto [begin, end] = ft::shard(FLAGS_batch, pg->rank(), pg->size());
        const int64_t first = (step * FLAGS_batch) % (kSamples - FLAGS_batch) + begin;
        const std::vector<int64_t> labels = nn::rows(data.labels, first, end - begin);
        sgd.zero_grad();
        Tensor logits = model->forward(nn::rows(data.inputs, first, end - begin));
        nn::LossResult loss = nn::softmax_cross_entropy(logits, labels);
        loss_value = loss.value;
        model->backward(loss.grad, [&](size_t i) {
          ddp_model->mark_grad_ready(i);
          if (victim && step == FLAGS_kill_step) {  // a machine failing mid-step, once
            victim = false;
            ::raise(kill_signal);
          }
        });
        ddp_model->finish_backward();
      } catch (const distcomm::Error& e) {
        manager.step_failed(e.what());
      }
      if (!manager.commit()) {
        ddp_model.reset();  // it belongs to the failed group; the step is redone over the next
        continue;
      }
      sgd.step();
      full_step_committed = pg->size() >= started_with;
      last_group_rank = pg->rank();
      last_group_size = pg->size();
      loss_sum += loss_value;
      ++loss_steps;
      if (FLAGS_log_every > 0 && (step + 1) % FLAGS_log_every == 0 && pg->rank() == 0) {
        std::printf("step %lld: loss %.4f (this member's mean over its last %d steps)\n",
                    static_cast<long long>(step + 1), loss_sum / loss_steps, loss_steps);
        std::fflush(stdout);
        loss_sum = 0;
        loss_steps = 0;
      }
    }
    if (await_replacement && !full_step_committed && last_group_size > 0 && last_group_rank == 0) {
      std::fprintf(stderr,
                   "ft_train: no replacement joined within %llu steps (10x --steps); ending with %d of the %d "
                   "members the job started with\n",
                   static_cast<unsigned long long>(await_limit), last_group_size, started_with);
    }
    // Every member's weights against the others', bit for bit: a hash of their bytes, whose
    // minimum and maximum over the members are equal only when every member's is.
    distcomm::ProcessGroupPtr pg = manager.begin_step(state);
    if (!pg) return 0;
    uint64_t hash = 1469598103934665603ull;  // FNV-1a
    for (nn::Parameter* p : model->parameters()) {
      const auto* bytes = static_cast<const unsigned char*>(p->value.data());
      for (size_t i = 0; i < p->value.nbytes(); ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
    }
    const int64_t mine = static_cast<int64_t>(hash >> 1);  // an int64 tensor, reduced exactly
    Tensor lowest = Tensor::of<int64_t>({mine}), highest = Tensor::of<int64_t>({mine});
    distcomm::AllReduceOptions min, max;
    min.op = distcomm::ReduceOp::MIN;
    max.op = distcomm::ReduceOp::MAX;
    pg->all_reduce(lowest, min)->wait();
    pg->all_reduce(highest, max)->wait();
    const bool in_sync = *static_cast<int64_t*>(lowest.data()) == *static_cast<int64_t*>(highest.data());
    distcomm::ordered_print(*pg, manager.id() + ": " + std::to_string(manager.committed_steps()) + " steps, weights " +
                                     (in_sync ? "identical to the other members'" : "DIFFER from the other members'"));
    manager.finish();  // a replacement still waiting to join stops waiting
    return in_sync ? 0 : 1;
  });
}
