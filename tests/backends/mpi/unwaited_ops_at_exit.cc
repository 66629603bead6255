// Returns from main with collectives still running: the plugin's exit handler must let
// them finish on every rank, then finalize MPI, so that mpirun exits 0 (a process that
// exits without MPI_Finalize, or hangs, fails the job).
//
// Rank 0 starts late, so the other ranks reach exit with their ops waiting for it.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "api/init.h"

namespace {

distcomm::Tensor* g_tensor = nullptr;
int g_size = 0;

// Registered before MPI is initialised, so it runs after the plugin's exit handler.
void check_result_at_exit() {
  const int n = g_size;
  const double want = static_cast<double>(n) * n * (n * (n + 1) / 2);  // three sums of rank + 1
  const double got = g_tensor->item(0);
  std::printf("unwaited all_reduces at exit: got %g, expected %g: %s\n", got, want, got == want ? "OK" : "WRONG");
  std::fflush(stdout);
  if (got != want) _exit(3);
}

}  // namespace

int main() {
  std::atexit(check_result_at_exit);
  distcomm::InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(30);
  auto pg = distcomm::init_process_group(o);
  g_size = pg->size();
  if (pg->rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  g_tensor = new distcomm::Tensor(distcomm::Tensor::of<double>({pg->rank() + 1.0}));
  for (int k = 0; k < 3; ++k) pg->all_reduce(*g_tensor);
  pg->barrier();
  return 0;  // nothing waited for
}
