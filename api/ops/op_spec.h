// An op as the ProcessGroup's pipeline takes it (ProcessGroup::issue): what it is, what it
// is described and routed by, and what its fingerprint says besides. Each op of
// process_group_ops.cc checks its arguments, fills one of these and hands it to the
// pipeline with the call to its backend; everything else (routing, the reduction plan,
// numbering, DISTCOMM_DEBUG=DETAIL's checks, the flight recorder, AVG's division) is the
// pipeline's.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/plugin/backend.h"

namespace distcomm {

// Which sequence an op is numbered in: the group's collectives, its point-to-point ops, or
// the host exchange's own collectives (groups without a store).
enum class OpKind { kCollective, kPointToPoint, kInternal };

struct OpSpec {
  OpType type = OpType::kAllReduce;
  OpKind kind = OpKind::kCollective;
  // Describes the op (dtype, count, shape in its description and fingerprint) and routes
  // it to the backend of its device type; null: `device` routes it (barrier, a batch).
  const Tensor* tensor = nullptr;
  DeviceType device = DeviceType::kCPU;
  std::chrono::milliseconds timeout{0};  // the op's option: kUseDefault is the group's
  // A reducing op: planned (AVG, PREMUL_SUM on the host where the backend lacks them) and
  // named in the fingerprint.
  std::optional<ReduceOp> reduction;
  // Where the plan's division lands once the backend's work ends (AVG on the host); null:
  // none here (a reduce's non-root ranks).
  const Tensor* divided = nullptr;
  int root = -1;  // rooted collectives; point to point: the peer (-1: any source)
  int tag = 0;    // point to point
  std::vector<int64_t> send_counts, recv_counts;  // all_to_all
  // A batch of sends and receives the backend runs as one call (DETAIL checks each).
  const std::vector<P2POp>* batch = nullptr;
  std::string description_suffix;  // appended to the description (" in 3 tensors")
  // The host tensor the op writes while it runs (an output, a recv's tensor): recorded with
  // its Work for the list forms' issue order (op_overlaps.h); null: none, or one of the
  // pool's buffers (a list op records its own tensors' write-back).
  const Tensor* written = nullptr;
};

}  // namespace distcomm
