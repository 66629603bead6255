// A stand-in for a fault-tolerant training program (ft::Manager), as small as one can be,
// for the launcher's tests of replacements: each step all-reduces a tiny state over the
// generation's group. Arguments (all optional):
//   --steps=N            steps to commit (10)
//   --kill_rank=R        first member "rank<R>" SIGKILLs itself in step --kill_step (-1: none)
//   --also_kill_rank=R   first member "rank<R>" SIGKILLs itself too, in the same step (-1)
//   --kill_step=S        (3)
//   --min_members=N      ManagerOptions::min_members (1)
//   --recovery_timeout_ms=N  ManagerOptions::recovery_timeout (20000)
//   --backend=NAME       ManagerOptions::backend ("": the environment's); a name no plugin
//                        has makes every generation's group creation fail on every member
//   --misfit_replacement a replacement (DISTCOMM_FT_JOIN=1) says it has one parameter more
//                        than the members, so that every member's step fails while it is in
//                        one -- as a misbuilt model's DDP does -- and the members refuse it
//                        (ft/joiner_refusal.h). The members then train past --steps until
//                        that has happened (they cannot commit while it is in), and
//                        --after_refusal steps more (20): time for a launcher that wrongly
//                        starts another replacement to do so.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <distcomm/api/errors.h>
#include <distcomm/api/options.h>
#include <distcomm/api/run_main.h>
#include "ft/manager.h"

namespace {

int64_t flag(int argc, char** argv, const std::string& name, int64_t fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return std::atoll(argv[i] + prefix.size());
  }
  return fallback;
}

std::string text_flag(int argc, char** argv, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return "";
}

bool has(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t steps = static_cast<uint64_t>(flag(argc, argv, "steps", 10));
  const int64_t kill_rank = flag(argc, argv, "kill_rank", -1);
  const int64_t also_kill_rank = flag(argc, argv, "also_kill_rank", -1);
  const uint64_t kill_step = static_cast<uint64_t>(flag(argc, argv, "kill_step", 3));
  const int min_members = static_cast<int>(flag(argc, argv, "min_members", 1));
  const int64_t recovery_timeout_ms = flag(argc, argv, "recovery_timeout_ms", 20000);
  const uint64_t after_refusal = static_cast<uint64_t>(flag(argc, argv, "after_refusal", 20));
  const bool misfit = has(argc, argv, "--misfit_replacement");
  const std::string backend = text_flag(argc, argv, "backend");
  const char* join = std::getenv("DISTCOMM_FT_JOIN");
  const bool joining = join != nullptr && std::string(join) == "1";
  return distcomm::run_main("ft_member_probe", [&] {
    using distcomm::Tensor;
    Tensor weights = Tensor::of<float>({0.f, 0.f, 0.f, 0.f});
    std::vector<Tensor*> state{&weights};
    distcomm::ft::ManagerOptions options;
    options.state_signature = "probe 4";
    options.recovery_timeout = std::chrono::milliseconds(recovery_timeout_ms);
    options.min_members = min_members;
    options.backend = backend;
    distcomm::ft::Manager manager(options);
    const bool victim = (kill_rank >= 0 && manager.id() == "rank" + std::to_string(kill_rank)) ||
                        (also_kill_rank >= 0 && manager.id() == "rank" + std::to_string(also_kill_rank));
    const int64_t parameters = misfit && joining ? 5 : 4;
    // Every member commits the same steps and has the same failures, so all stop together.
    uint64_t stop_at = steps;
    bool refusal_seen = !misfit;
    // A bound, should the replacement never come: the test then fails instead of hanging.
    const uint64_t limit = steps + 1500;
    while (manager.committed_steps() < limit && !(refusal_seen && manager.committed_steps() >= stop_at)) {
      distcomm::ProcessGroupPtr pg = manager.begin_step(state);
      if (!pg) return 0;  // came after the training had finished
      const uint64_t step = manager.committed_steps();
      Tensor grad = Tensor::of<float>({1.f, 1.f, 1.f, 1.f});
      try {
        if (victim && step == kill_step) ::raise(SIGKILL);
        // What DDP checks first: the same parameters on every member.
        Tensor low = Tensor::of<int64_t>({parameters}), high = Tensor::of<int64_t>({parameters});
        distcomm::AllReduceOptions min, max;
        min.op = distcomm::ReduceOp::MIN;
        max.op = distcomm::ReduceOp::MAX;
        pg->all_reduce(low, min)->wait();
        pg->all_reduce(high, max)->wait();
        if (*static_cast<int64_t*>(low.data()) != *static_cast<int64_t*>(high.data())) {
          throw distcomm::InvalidArgument("ft_member_probe: a member has " +
                                          std::to_string(*static_cast<int64_t*>(high.data())) + " parameters, another " +
                                          std::to_string(*static_cast<int64_t*>(low.data())));
        }
        pg->all_reduce(grad)->wait();
      } catch (const distcomm::Error& e) {
        manager.step_failed(e.what());
      }
      if (!manager.commit()) continue;
      for (int i = 0; i < 4; ++i) static_cast<float*>(weights.data())[i] += static_cast<float*>(grad.data())[i];
      // The kill's failure and the misfit's (at least one): no commit follows the misfit's
      // until it is refused, so this commit is past the refusal.
      if (!refusal_seen && manager.failures().size() >= 2) {
        refusal_seen = true;
        stop_at = std::max(steps, manager.committed_steps() + after_refusal);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    manager.finish();
    std::printf("%s: %llu steps\n", manager.id().c_str(), static_cast<unsigned long long>(manager.committed_steps()));
    return 0;
  });
}
