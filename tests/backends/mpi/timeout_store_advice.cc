// The store advice in an mpi Timeout must be advice that works. Under mpirun the mpi backend
// gets no store from MASTER_ADDR and MASTER_PORT (init_process_group makes one only from
// InitOptions::store or an init_method other than env://), so a job that set them, as the
// Timeout of a collective once told it to, got the same "cannot be named" Timeout again.
// With them set (nothing listens there), rank 1 skips an all_reduce that rank 0 calls with a
// 2 s timeout: the Timeout must give an init_method as the advice (with tcp://127.0.0.1:PORT
// it then says "rank 1 has not issued any collective yet"), and must not tell the job to set
// MASTER_ADDR and MASTER_PORT. Rank 1 then stays stuck, and rank 0 exits without
// MPI_Finalize (its abandoned all_reduce never joined), as in exit_after_timeout: the job
// fails, as expected.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/tensor.h"
#include "tests/backends/mpi/job_markers.h"
#include "tests/backends/mpi/timeout_verdict.h"

int main() {
  using namespace distcomm;
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(20000 + ::getppid() % 20000).c_str(), 1);
  InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(20);
  ProcessGroupPtr pg = init_process_group(o);
  if (pg->rank() == 1) {
    if (testing::wait_for_markers("checked", {0}).empty()) return 1;
    sleep(600);  // stuck: rank 0's MPI_Finalize gives up on it, and mpirun ends the job
    return 0;
  }
  Tensor t = Tensor::zeros({4});
  AllReduceOptions a;
  a.timeout = std::chrono::seconds(2);
  std::string message;
  bool ok = testing::expect_timeout(
      "rank 0", "all_reduce with MASTER_ADDR set",
      [&] {
        try {
          pg->all_reduce(t, a)->wait();
        } catch (const Timeout& e) {
          message = e.what();
          throw;
        }
      },
      "give the job a store (an init_method such as tcp://HOST:PORT", 1.5, 10);
  // The advice that did not work: "give the job a store (MASTER_ADDR and MASTER_PORT)".
  if (message.find("(MASTER_ADDR and MASTER_PORT)") != std::string::npos) {
    std::printf("rank 0: FAILED: the Timeout still tells a job that set MASTER_ADDR and MASTER_PORT to set them\n");
    ok = false;
  }
  if (ok) std::printf("rank 0: store advice OK\n");
  std::fflush(stdout);
  testing::write_marker("checked");
  return ok ? 0 : 1;
}
