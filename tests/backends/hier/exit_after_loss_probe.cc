// A rank of a hierarchical group (4 ranks, 2 simulated hosts) that all-reduces until a peer
// is lost and then ends as a program does: its error out of run_main, exit(1) with the
// default group still alive, destroyed by exit() while the group's threads still see
// connections close. Rank 0 kills itself (SIGKILL) after a few ops.
#include <signal.h>

#include "api/init.h"
#include "api/run_main.h"
#include "api/tensor.h"

int main() {
  return distcomm::run_main("exit_after_loss_probe", [] {
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group();
    distcomm::Tensor t = distcomm::Tensor::zeros({4096});
    for (int i = 0;; ++i) {
      if (pg->rank() == 0 && i == 20) ::raise(SIGKILL);
      pg->all_reduce(t)->wait();
    }
    return 0;
  });
}
