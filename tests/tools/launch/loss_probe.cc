// A distcomm program whose one rank dies, for the tests of how a job's machines name its
// first failure (job_first_failure_test):
//
//   loss_probe <victim rank>
//
// Every rank all-reduces over gloo's world group every 20 ms; in step 20 the victim
// SIGKILLs itself. The others' next op fails (a PeerFailure naming who went), which
// run_main prints and reports; the group's timeout is 20 s, a bound the test never meets.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "api/init.h"
#include "api/run_main.h"

int main(int argc, char** argv) {
  return distcomm::run_main("loss_probe", [&] {
    if (argc != 2) throw std::invalid_argument("usage: loss_probe <victim rank>");
    const int victim = std::atoi(argv[1]);
    distcomm::InitOptions init;
    init.backend = "gloo";
    init.timeout = std::chrono::seconds(20);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    for (int step = 0;; ++step) {
      if (pg->rank() == victim && step == 20) ::raise(SIGKILL);
      distcomm::Tensor t = distcomm::Tensor::of<float>({1.f});
      pg->all_reduce(t)->wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  });
}
