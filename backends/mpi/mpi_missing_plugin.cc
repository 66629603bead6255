// libdistcomm_mpi.so built on a machine without Open MPI: a plugin that loads, says why it
// cannot run (the reason the build found, see third_party/system_libs.bzl) and creates
// nothing, so that "backend mpi" fails with that reason instead of "no such plugin".
#include <string>

#include "api/errors.h"
#include "api/plugin.h"
#include "backends/mpi/mpi_config.h"
#include "backends/mpi/mpi_missing_reason.h"

namespace {

int available(std::string* why) {
  if (why) *why = kMpiMissingReason;
  return 0;
}

distcomm::Backend* create(const distcomm::BackendOptions&) {
  throw distcomm::BackendUnavailable(std::string("mpi backend: ") + kMpiMissingReason);
}

}  // namespace

DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("mpi", "unavailable", DISTCOMM_DEVICE_CPU, DISTCOMM_PLUGIN_SELF_RENDEZVOUS, available,
                                   create, distcomm::mpi::kConfigKeys)
