// A fault-tolerant program from outside distcomm's repository, built against an installed
// distcomm with pkg-config (distcomm-ft) and CMake (distcomm::ft); see install_test.sh. It
// trains one weight for 3 steps under distcomm::ft::Manager (ft/manager.h): each step's
// group comes from begin_step, rank r contributes the gradient r + 1 through all_reduce,
// and the update is applied only when commit() says every member finished the step. Each
// rank prints one line: its member id, the steps committed, its generation and the weight.
#include <distcomm/api/errors.h>
#include <distcomm/api/run_main.h>
#include <distcomm/api/tensor.h>
#include <distcomm/ft/manager.h>

#include <cstdio>

int main() {
  return distcomm::run_main("ft_consumer", [] {
    distcomm::Tensor weight = distcomm::Tensor::of({0.0f});  // the state a joiner would receive
    distcomm::ft::ManagerOptions options;
    options.state_signature = "one float weight";
    distcomm::ft::Manager manager(options);
    while (manager.committed_steps() < 3) {
      distcomm::ProcessGroupPtr pg = manager.begin_step({&weight});
      distcomm::Tensor grad = distcomm::Tensor::of({static_cast<float>(pg->rank() + 1)});
      try {
        pg->all_reduce(grad)->wait();
      } catch (const distcomm::Error& e) {
        manager.step_failed(e.what());
      }
      if (manager.commit()) weight.set_item(0, weight.item() + grad.item());
    }
    manager.finish();
    std::printf("%s: %llu steps committed in %s, weight %g\n", manager.id().c_str(),
                static_cast<unsigned long long>(manager.committed_steps()),
                manager.generation().describe().c_str(), weight.item());
    return 0;
  });
}
