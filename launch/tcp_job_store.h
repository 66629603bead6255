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
// With nnodes > 1 it also says node 0's shape (nnodes x nproc_per_node) in the store, and is
// doomed once another machine's launcher says that it was given another.
//
// For request.node_rank != 0 (another machine's launcher, before its ranks start): serves
// nothing; connects to node 0's store (waiting for it up to the ranks' default timeout,
// kDefaultGroupTimeout), compares node 0's shape with the request's and returns nullptr
// when they agree (or node 0's launcher, an older one, says none within 10 s). When they
// do not, it tells node 0's launcher, and throws std::runtime_error naming both shapes.
std::unique_ptr<JobStore> serve_tcp_job_store(const JobStoreRequest& request);

}  // namespace launch
}  // namespace distcomm
