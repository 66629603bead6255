// Per-op options: one small struct per collective, as Gloo and c10d do, so call sites name
// what they set (`ReduceOptions o; o.root = 2; o.op = ReduceOp::MAX;`).
#pragma once

#include <chrono>

#include "api/reduce_op.h"
#include "api/timeouts.h"

// cudaStream_t is `CUstream_st*`; declared here so that options can carry a stream without
// distcomm's headers including CUDA's.
struct CUstream_st;

namespace distcomm {

// Every op's options carry `cuda_stream`, used by CUDA tensors only (the nccl backend): the
// op starts after the work already queued on that stream, and Work::wait() makes that
// stream (not the host) wait for the op's end. nullptr is CUDA's legacy default stream.

// A timeout left at kUseDefault (timeouts.h) is the group's (set at init_process_group); one
// of 0 ms is refused by the op's call (InvalidArgument), on every backend.

struct AllReduceOptions {
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

struct BroadcastOptions {
  int root = 0;  // rank in the group
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

struct ReduceOptions {
  int root = 0;
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

struct AllGatherOptions {
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

struct GatherOptions {
  int root = 0;
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

struct ScatterOptions {
  int root = 0;
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

struct AllToAllOptions {
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

struct BarrierOptions {
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

struct P2POptions {
  int tag = 0;
  std::chrono::milliseconds timeout = kUseDefault;
  CUstream_st* cuda_stream = nullptr;
};

}  // namespace distcomm
