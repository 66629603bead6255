// A new_group whose mpi backend fails on one rank after its communicator was made (rank 1's
// stall watch refuses DISTCOMM_STALL_REPORT_SECONDS, which it alone sets after init) leaves
// every rank's MPI runtime serving as many groups as before: the half-made backend's queue
// and communicator are let go, not kept for the process's life, one per failed new_group
// (helper-64's review). Five rounds; then the world group still works. The count comes from
// the plugin's diagnostic entry point, distcomm_mpi_groups_served.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "api/tensor.h"
#include "tests/backends/mpi/job_markers.h"

namespace {

using GroupsServed = long (*)();

// The loaded mpi plugin's entry point (the loader opens plugins with their own symbols).
GroupsServed groups_served() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto at = line.find('/');
    if (at == std::string::npos || line.find("libdistcomm_mpi.so") == std::string::npos) continue;
    void* plugin = ::dlopen(line.substr(at).c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!plugin) continue;
    return reinterpret_cast<GroupsServed>(::dlsym(plugin, "distcomm_mpi_groups_served"));
  }
  return nullptr;
}

}  // namespace

int main() {
  using namespace distcomm;
  const int rank = testing::job_rank();
  const char* dir = std::getenv("TEST_TMPDIR");
  InitOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(20);
  // A store: the mpi backend makes a stall watch only where its group has one.
  o.init_method = std::string("file://") + (dir ? dir : "/tmp") + "/failed_new_group_store";
  ProcessGroupPtr pg = init_process_group(o);
  const GroupsServed served = groups_served();
  if (!served) {
    std::printf("rank %d: FAILED: no distcomm_mpi_groups_served in the loaded mpi plugin\n", rank);
    return 1;
  }
  const long before = served();
  if (rank == 1) ::setenv("DISTCOMM_STALL_REPORT_SECONDS", "soon", 1);
  int failed = 0;
  for (int round = 0; round < 5; ++round) {
    try {
      pg->new_group({0, 1, 2});
    } catch (const Error& e) {
      ++failed;
      if (std::string(e.what()).find("DISTCOMM_STALL_REPORT_SECONDS='soon'") == std::string::npos) {
        std::printf("rank %d: FAILED: new_group's error does not name the cause: %s\n", rank, e.what());
        return 1;
      }
    }
  }
  ::unsetenv("DISTCOMM_STALL_REPORT_SECONDS");
  const long after = served();
  Tensor t = Tensor::of<float>({1.0f});
  pg->all_reduce(t)->wait();
  const bool ok = failed == 5 && after == before && t.item(0) == 3.0;
  std::printf("rank %d: %s: %d of 5 new_group failed, groups served %ld before and %ld after, world all_reduce %g\n",
              rank, ok ? "failed new_groups leave no communicator" : "FAILED", failed, before, after, t.item(0));
  return ok ? 0 : 1;
}
