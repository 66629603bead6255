// The launcher's job store over the core's TCPStoreServer (launch/job_store.h): what
// tools/launch gives run_job as LaunchOptions::serve_store. A library apart from
// //launch:launcher, which does not link the core.
#pragma once

#include <memory>

#include "launch/job_store.h"

namespace distcomm {
namespace launch {

// A TCPStoreServer for the request, listening when this returns (its poll() loop runs in a
// thread of its own, which logs and ends on an error rather than throw). Throws
// std::runtime_error (the core's StoreError) when it cannot listen. It refuses a rank whose
// world size is not request.world_size, telling it and this launcher (JobStore::doomed) what
// to change: the two sides' ranks would otherwise wait for each other until their timeout.
std::unique_ptr<JobStore> serve_tcp_job_store(const JobStoreRequest& request);

}  // namespace launch
}  // namespace distcomm
