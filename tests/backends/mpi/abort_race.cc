// ProcessGroup::abort() called on one mpi group by two threads at once (a watchdog and the
// main thread, say) while a third thread runs all_reduces on it: both calls return, the
// ops fail, and nothing crashes. The backend's shutdown ran twice: the second call could
// find the group's queue released by the first while its detach task was still queued on
// the MPI thread, which then dereferenced a null queue (SIGSEGV in OpQueue::refuse_new).
// The race needs many tries to show: a fresh group each round, 300 rounds.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "api/errors.h"
#include "api/init.h"
#include "api/tensor.h"

int main() {
  using namespace distcomm;
  InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(20);
  ProcessGroupPtr pg = init_process_group(o);
  const int rank = pg->rank();
  constexpr int kRounds = 300;
  for (int round = 0; round < kRounds; ++round) {
    // Every rank's own group, so that no rank waits for a peer's op to time out.
    std::shared_ptr<ProcessGroup> own;
    for (int r = 0; r < pg->size(); ++r) {
      auto g = pg->new_group({r});
      if (g) own = g;
    }
    std::atomic<bool> ended{false};
    std::thread ops([&] {
      try {
        while (true) {
          Tensor t = Tensor::zeros({1000});
          own->all_reduce(t)->wait();
        }
      } catch (const Error&) {
        ended = true;  // the abort failed it, as it must
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 10)));
    std::thread watchdog([&] { own->abort(); });
    own->abort();
    watchdog.join();
    ops.join();
    if (!ended) {
      std::printf("rank %d: FAILED: the ops did not end with an error after abort\n", rank);
      return 1;
    }
  }
  Tensor t = Tensor::zeros({1});
  t.fill(1);
  pg->all_reduce(t)->wait();
  std::printf("rank %d: abort from two threads at once: OK (%d rounds, world sum %g)\n", rank, kRounds, t.item(0));
  return 0;
}
