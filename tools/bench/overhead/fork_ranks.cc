#include "tools/bench/overhead/fork_ranks.h"

#include <chrono>
#include <cstdio>
#include <exception>

#include "api/process/failure_report.h"
#include "api/process/local_processes.h"

namespace distcomm {
namespace bench {

bool fork_ranks(int nproc, const std::string& name, const std::function<void(int rank)>& fn) {
  local::ChildSet children;
  for (int rank = 0; rank < nproc; ++rank) {
    try {
      children.add(local::fork_child([&] {
        fn(rank);
        return std::string();
      }));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: cannot start rank %d: %s\n", name.c_str(), rank, e.what());
      children.kill_all();
      return false;
    }
  }
  bool ok = true;
  while (children.running() > 0) {
    // Sleeps on the children's pidfds: the parent takes nothing from the ranks meanwhile.
    for (size_t rank : children.poll(std::chrono::hours(1))) {
      const local::Child& c = children[rank];
      if (local::exited_cleanly(c.status)) continue;
      const auto thrown = FailureReport::decode(c.report);
      std::fprintf(stderr, "%s rank %zu: %s\n", name.c_str(), rank,
                   (thrown ? "it threw " + thrown->message : local::describe_wait_status(c.status)).c_str());
      if (!ok) continue;
      ok = false;  // the others would wait for this rank until their timeout: stop them
      children.kill_all();
    }
  }
  return ok;
}

}  // namespace bench
}  // namespace distcomm
