// "hier" with hier_across = mpi under mpirun, one rank per (simulated) host: the group runs
// flat, and its flat backend must be mpi, as asked (docs/many-hosts.md: mpi is also the
// hierarchy's flat backend), and say so; it used to run gloo in silence ("cpu: gloo, flat:
// one rank per host"). Each rank is on host h<rank> (DISTCOMM_HOST_ID, set before init);
// the world has a file store (in TEST_TMPDIR), which the hierarchy needs.
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "api/init.h"
#include "api/tensor.h"

int main() {
  using namespace distcomm;
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) {
    std::fprintf(stderr, "run under mpirun (tests/backends/mpi/mpirun_test.sh)\n");
    return 2;
  }
  ::setenv("DISTCOMM_HOST_ID", (std::string("h") + rank).c_str(), 1);
  ::setenv("DISTCOMM_HIER_ACROSS", "mpi", 1);
  const char* dir = std::getenv("TEST_TMPDIR");
  InitOptions o;
  o.backend = "hier";
  o.timeout = std::chrono::seconds(60);
  o.init_method = std::string("file://") + (dir ? dir : "/tmp") + "/hier_one_rank_per_host_store";
  ProcessGroupPtr pg = init_process_group(o);
  const std::string name = pg->backend_name();
  const std::string cpu = pg->backend_for(DeviceType::kCPU).name();
  Tensor t = Tensor::of({1.f, 1.f, 1.f, 1.f, 1.f});
  pg->all_reduce(t)->wait();
  const bool sums = t.data_as<float>()[0] == static_cast<float>(pg->size());
  const bool ok = name == "hier (cpu: mpi, flat: one rank per host)" && cpu == "mpi" && sums;
  std::printf("rank %d: %s: backend %s, cpu backend %s, all_reduce %s\n", pg->rank(), ok ? "flat over mpi" : "FAILED",
              name.c_str(), cpu.c_str(), sums ? "sums" : "is wrong");
  std::fflush(stdout);
  destroy_process_group();
  return ok ? 0 : 1;
}
