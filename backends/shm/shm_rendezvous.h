// Group creation: every rank creates its segment, publishes where to find it in the
// group's store, then maps every peer's. Refuses, naming the rank, a peer on another host
// (or another PID namespace) and a peer whose layout settings differ.
#pragma once

#include <memory>

#include "api/plugin/backend.h"
#include "backends/shm/shm_config.h"
#include "backends/shm/shm_group.h"

namespace distcomm {
namespace shm {

// Collective over the group: every rank calls it. Throws BackendUnavailable (cannot share
// memory with a peer), InvalidArgument (settings differ) or Timeout (a rank did not come).
std::unique_ptr<MappedGroup> join_group(const BackendOptions& options, const ShmConfig& config);

}  // namespace shm
}  // namespace distcomm
