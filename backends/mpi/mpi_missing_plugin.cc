// libdistcomm_mpi.so built on a machine without Open MPI: a plugin that loads and says why
// it cannot run (the reason the build found, see third_party/system_libs.bzl), so that
// "backend mpi" fails with that reason instead of "no such plugin".
#include "api/plugin/plugin.h"
#include "backends/mpi/mpi_config.h"
#include "backends/mpi/mpi_missing_reason.h"

DISTCOMM_DEFINE_UNAVAILABLE_PLUGIN("mpi", "mpi (not built: library missing)", DISTCOMM_DEVICE_CPU,
                                   DISTCOMM_PLUGIN_SELF_RENDEZVOUS, kMpiMissingReason, distcomm::mpi::kConfigKeys)

// The diagnostic the real plugin exports (plugin_exports.lds): no MPI, so no runtime.
extern "C" __attribute__((visibility("default"))) long distcomm_mpi_groups_served() { return -1; }
