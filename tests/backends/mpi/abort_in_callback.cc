// ProcessGroup::abort() from a Work callback (on the thread that runs the plugin's MPI
// round) and, meanwhile, from another thread: the second call must return only once the
// group is shut down, i.e. every op of the group has failed, as abort() promises. The
// callback's shutdown does not take the lock a second caller waits on (it cannot wait for
// its own thread), so the second call used to return at once, before the ops had failed.
//
// A two-rank subgroup: on each rank, two recvs from the other that it never sends stay pending;
// the first one's callback (run by the callback's shutdown as it fails the recvs) takes
// 1 s, so the second recv fails only after it. An all_reduce's callback aborts the group;
// once it has begun, another thread aborts too and then looks at the second recv.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "api/errors.h"
#include "api/init.h"
#include "api/tensor.h"

int main() {
  using namespace distcomm;
  using Clock = std::chrono::steady_clock;
  InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(20);
  ProcessGroupPtr pg = init_process_group(o);
  const int rank = pg->rank();
  std::shared_ptr<ProcessGroup> own = pg->new_group({0, 1});
  const int peer = 1 - rank;
  Tensor a = Tensor::zeros({4});
  Tensor b = Tensor::zeros({4});
  P2POptions first;
  first.tag = 7;
  P2POptions second;
  second.tag = 8;
  WorkPtr r1 = own->recv(a, peer, first);
  WorkPtr r2 = own->recv(b, peer, second);
  r1->on_finish([](std::exception_ptr) { std::this_thread::sleep_for(std::chrono::seconds(1)); });
  std::atomic<bool> aborting{false};
  Tensor t = Tensor::zeros({4});
  WorkPtr reduce = own->all_reduce(t);
  reduce->on_finish([&](std::exception_ptr) {
    aborting = true;
    own->abort();
  });
  const Clock::time_point start = Clock::now();
  while (!aborting && Clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  bool ok = aborting.load();
  bool second_failed = false;
  double took = 0;
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the callback's shutdown has begun
    const Clock::time_point called = Clock::now();
    own->abort();
    took = std::chrono::duration<double>(Clock::now() - called).count();
    second_failed = r2->is_completed() && !r2->is_success();
  });
  watchdog.join();
  ok = ok && second_failed;
  for (WorkPtr w : {r1, r2}) {
    try {
      w->wait();
      ok = false;
    } catch (const Error&) {
    }
  }
  Tensor s = Tensor::zeros({1});
  s.fill(1);
  pg->all_reduce(s)->wait();
  std::printf("rank %d: %s: abort on another thread returned after %.2f s, the group's ops %s (world sum %g)\n", rank,
              ok ? "abort beside an abort in a Work callback: OK" : "FAILED", took,
              second_failed ? "had failed" : "had NOT all failed yet", s.item(0));
  return ok ? 0 : 1;
}
