// mpi without a store: rank 0 calls new_group([0, 1]) on a thread, rank 1 never does, and
// rank 0's main thread aborts the parent (the world group) after 1 s. The new_group must end
// within about a second of the abort with a PeerFailure saying the parent was aborted and
// naming rank 1 (as gloo's, and mpi's with a store, do), not wait out the 20 s timeout
// (docs/subgroups.md). Rank 1 waits in a marker until rank 0 has checked, so the job ends
// cleanly.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "api/errors.h"
#include "api/init.h"
#include "tests/backends/mpi/job_markers.h"

int main() {
  using namespace distcomm;
  using Clock = std::chrono::steady_clock;
  InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(20);
  ProcessGroupPtr pg = init_process_group(o);
  pg->barrier()->wait();
  if (pg->rank() == 1) return testing::wait_for_markers("checked", {0}).empty() ? 1 : 0;
  std::string outcome = "FAILED: new_group returned";
  Clock::time_point ended;
  std::thread creating([&] {
    try {
      pg->new_group({0, 1});
    } catch (const PeerFailure& e) {
      outcome = e.what();
    } catch (const Error& e) {
      outcome = std::string("FAILED: not a PeerFailure: ") + e.what();
    }
    ended = Clock::now();
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const Clock::time_point aborted = Clock::now();
  pg->abort();
  creating.join();
  const double after = std::chrono::duration<double>(ended - aborted).count();
  const bool named = outcome.find("was aborted (ProcessGroup::abort) or destroyed on this rank while it waited for "
                                  "ranks [1] to arrive") != std::string::npos;
  const bool ok = named && after < 2.0;
  std::printf("rank 0: %s: new_group ended %.1f s after the abort: %s\n",
              ok ? "new_group stopped at the parent's abort" : "FAILED", after, outcome.c_str());
  testing::write_marker("checked");
  return ok ? 0 : 1;
}
