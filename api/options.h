// Per-op options: one small struct per collective, as Gloo and c10d do, so call sites name
// what they set (`ReduceOptions o; o.root = 2; o.op = ReduceOp::MAX;`).
#pragma once

#include <chrono>

#include "api/reduce_op.h"

namespace distcomm {

// A timeout of kGroupTimeout means "the group's timeout" (set at init_process_group).
constexpr std::chrono::milliseconds kGroupTimeout{-1};

struct AllReduceOptions {
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct BroadcastOptions {
  int root = 0;  // rank in the group
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct ReduceOptions {
  int root = 0;
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct AllGatherOptions {
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct GatherOptions {
  int root = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct ScatterOptions {
  int root = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct AllToAllOptions {
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct BarrierOptions {
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct P2POptions {
  int tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

}  // namespace distcomm
