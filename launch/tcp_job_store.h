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
// doomed once another machine's launcher that node 0 still waits for says that it was given
// another.
//
// The shape check is a start-up check: each other node's launcher says in the store that
// it agreed before its ranks start. Once node k's has, a launcher that claims node k in
// another shape (a typo on a third machine) is a stranger: it is refused, the store logs one
// line and the running job goes on (not doomed). So is a client of another world size once
// every node's launcher has agreed.
//
// For request.node_rank != 0 (another machine's launcher, before its ranks start): serves
// nothing; connects to node 0's store (waiting for it up to 60 s), compares node 0's shape
// with the request's and returns nullptr when they agree (or node 0's launcher, an older
// one, says none within 2 s; or the store cannot be reached: the ranks start unchecked,
// saying so). Throws std::runtime_error, one line naming why, when node 0's store refuses
// this launcher (a wrong DISTCOMM_STORE_TOKEN, another DISTCOMM_RUN_ID), when this node has
// joined node 0's job already in another shape, or when node 0 runs another shape (both
// named; node 0's launcher is told and ends too).
std::unique_ptr<JobStore> serve_tcp_job_store(const JobStoreRequest& request);

}  // namespace launch
}  // namespace distcomm
