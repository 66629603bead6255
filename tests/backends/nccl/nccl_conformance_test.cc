// The shared conformance suite (tests/backends/conformance) for the nccl backend, on CUDA
// tensors: world sizes 1 to 4, one GPU per rank; where there are not enough GPUs each case
// skips with the reason ("no CUDA device: ..." on the build machines).
//
// What runs is what NCCL and CUDA tensors allow. Left out, each covered elsewhere:
// bitwise reductions of integers (NCCL has none: refused, see nccl_cuda_streams_test),
// tagged send/recv and recv_any_source (NCCL has no tags and no wildcard receive; plain
// send/recv and the backend's gather/scatter are in nccl_cuda_ops_test), and subgroup
// and bad-argument checks made with host tensors.
#include <gtest/gtest.h>

#include <deque>

#include "api/process_group.h"
#include "tests/backends/conformance/conformance.h"
#include "tests/backends/nccl/cuda_tensor.h"
#include "tests/backends/nccl/cuda_test_env.h"
#include "tests/backends/nccl/gpu_group.h"
#include "tests/backends/nccl/gpu_world_size_test.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace testing {
namespace {

using conformance::Layout;

// Device copies for the suite: every tensor it places on the GPU lives until the arena
// goes (the suite's tensors are views with no owner; a check's tensors are dead when the
// check returns, so an arena per sweep bounds the memory).
class CudaArena {
 public:
  explicit CudaArena(int device)
      : placement_{[this](const Tensor& host) {
                     tensors_.emplace_back(host, device_);
                     return tensors_.back().tensor();
                   },
                   [](const Tensor& on_device) { return copy_to_host(on_device); }},
        device_(device) {}
  const conformance::Placement& placement() const { return placement_; }

 private:
  const conformance::Placement placement_;
  const int device_;
  std::deque<CudaTensor> tensors_;
};

// What NCCL reduces: every pair reduce_supported allows but bitwise ops on integers and
// xor on bool.
std::vector<conformance::ReduceCase> nccl_reduce_cases() {
  std::vector<conformance::ReduceCase> cases;
  for (const auto& c : conformance::supported_reduce_cases()) {
    const bool bitwise = c.op.kind == ReduceOp::BAND || c.op.kind == ReduceOp::BOR || c.op.kind == ReduceOp::BXOR;
    if (!bitwise || (c.dtype == DType::kBool && c.op.kind != ReduceOp::BXOR)) cases.push_back(c);
  }
  return cases;
}

void sweep(ProcessGroup& pg, int64_t count) {
  CudaArena arena(test_device_of_rank(pg.rank()));
  const auto& p = arena.placement();
  const int last = pg.size() - 1;
  for (const auto& c : nccl_reduce_cases()) {
    conformance::check_all_reduce(pg, c.dtype, c.op, count, p);
    conformance::check_reduce(pg, c.dtype, c.op, count, last, p);
    conformance::check_reduce_scatter(pg, c.dtype, c.op, count, Layout::kTensor, p);
    // The list form: one ncclReduce per rank (Backend::reduce_scatter_list).
    conformance::check_reduce_scatter(pg, c.dtype, c.op, count, Layout::kList, p);
  }
  // Coalesced by the backend: one NCCL group of all_reduces (mixed shapes, one empty).
  if (count == 7) {
    for (const auto& c : nccl_reduce_cases()) conformance::check_all_reduce_coalesced(pg, c.dtype, c.op, p);
  }
  for (DType dtype : conformance::all_dtypes()) {
    conformance::check_broadcast(pg, dtype, count, last, p);
    conformance::check_all_gather(pg, dtype, count, Layout::kTensor, p);
    conformance::check_all_gather(pg, dtype, count, Layout::kInPlace, p);
    conformance::check_all_to_all_single(pg, dtype, count, false, p);
    conformance::check_all_to_all_single(pg, dtype, count, true, p);
    // The list forms go whole to the backend (Backend::list_ops): one NCCL group each.
    conformance::check_all_gather(pg, dtype, count, Layout::kList, p);
    conformance::check_gather(pg, dtype, count, last, p);
    conformance::check_scatter(pg, dtype, count, 0, p);
    conformance::check_all_to_all_list(pg, dtype, count, p);
  }
}

class NcclConformanceTest : public GpuWorldSizeTest {};

TEST_P(NcclConformanceTest, SweepsAtCounts0To1000) {
  run_gpu_group(GetParam(), "nccl", [](ProcessGroup& pg) {
    for (int64_t count : {0, 1, 7, 1000}) sweep(pg, count);
  });
}

TEST_P(NcclConformanceTest, LargeCountsInFlightAndBarrier) {
  run_gpu_group(GetParam(), "nccl", [](ProcessGroup& pg) {
    CudaArena arena(test_device_of_rank(pg.rank()));
    conformance::sweep_large(pg, 1 << 20, arena.placement());
    conformance::check_many_in_flight(pg, 50, 1000, arena.placement());
    if (pg.size() >= 2) conformance::check_barrier(pg, arena.placement());
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, NcclConformanceTest, ::testing::Values(1, 2, 3, 4), world_size_name);

}  // namespace
}  // namespace testing
}  // namespace distcomm
