// Both ranks return from main with ops not waited for, which no peer ever joins, and without
// destroy_process_group (the default group, alive in a static, still holds them at exit):
// rank 0 a send (tag 9, which rank 1 never receives) and an all_reduce rank 1 never joins,
// rank 1 a recv of tag 5, which rank 0 never sends. The group's timeout is 60 s. The exit
// must not wait for those ops' deadlines (each rank's MPI_Finalize would wait for the other
// until then): each rank gives what is left up after a 2 s drain, says so in one line, and
// the job finalizes and succeeds within seconds. mpirun_test.sh --expect-success-within
// and --expect-output check both.
#include <chrono>
#include <cstdio>

#include "api/init.h"
#include "api/run_main.h"

int main() {
  return distcomm::run_main("unfinished_ops_exit", [] {
    distcomm::InitOptions o;
    o.backend = "mpi";
    o.timeout = std::chrono::seconds(60);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(o);
    if (pg->rank() == 0) {
      distcomm::Tensor sent = distcomm::Tensor::of({1.f, 2.f}), reduced = distcomm::Tensor::zeros({4});
      pg->send(sent, 1, distcomm::P2POptions{9});
      pg->all_reduce(reduced);
      std::printf("rank 0: returning from main with the send and the all_reduce not waited for\n");
    } else {
      distcomm::Tensor received = distcomm::Tensor::zeros({1});
      pg->recv(received, 0, distcomm::P2POptions{5});
      std::printf("rank 1: returning from main with the recv not waited for\n");
    }
    std::fflush(stdout);
    return 0;
  });
}
