// A distcomm program whose one rank dies while the group the others work in does not hold
// it, for launcher_stopped_peers_test:
//
//   stopped_peers_probe <backend> <victim rank> [world]
//
// Every rank joins the world group over <backend> and a subgroup of every rank but the
// victim. The subgroup's members all-reduce over it every 20 ms; the victim SIGKILLs itself
// once the others are under way (after 40 of their steps, which it waits for on nothing but
// its clock: it takes no part in them). Its launcher then stops its machine-mates, members
// of the subgroup; the members on the other machine lose them, and their next op fails
// with a PeerFailure naming who went and why, which run_main prints and reports. A loss
// the survivors can only see after the launcher's stop, so its marks are always there to
// read. The groups' timeout is 20 s, a bound the test never meets. With `world`, everyone,
// the victim too, all-reduces over the world group instead (as loss_probe, over any
// backend): the survivors may then see the victim go before its machine-mates' stop.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "api/init.h"
#include "api/run_main.h"

int main(int argc, char** argv) {
  return distcomm::run_main("stopped_peers_probe", [&] {
    if (argc < 3 || argc > 4) {
      throw std::invalid_argument("usage: stopped_peers_probe <backend> <victim rank> [world]");
    }
    const std::string backend = argv[1];
    const int victim = std::atoi(argv[2]);
    distcomm::InitOptions init;
    init.backend = backend;
    init.timeout = std::chrono::seconds(20);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    std::vector<int> members;
    for (int r = 0; r < pg->size(); ++r) {
      if (r != victim) members.push_back(r);
    }
    std::shared_ptr<distcomm::ProcessGroup> sub =
        argc == 4 && std::string(argv[3]) == "world" ? pg : pg->new_group(members, backend);
    if (pg->rank() == victim && sub != pg) {
      std::this_thread::sleep_for(std::chrono::milliseconds(40 * 20));
      ::raise(SIGKILL);
    }
    for (int step = 0;; ++step) {
      if (pg->rank() == victim && step == 40) ::raise(SIGKILL);
      distcomm::Tensor t = distcomm::Tensor::of<float>({1.f});
      sub->all_reduce(t)->wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  });
}
