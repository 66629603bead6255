// Every nccl op on real CUDA tensors, checked against a host reference, for world sizes
// of 1 to 4 ranks (one GPU each). Skips with the reason where there are not enough GPUs.
#include <gtest/gtest.h>

#include <numeric>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/backends/nccl/cuda_tensor.h"
#include "tests/backends/nccl/cuda_test_env.h"
#include "tests/backends/nccl/gpu_group.h"
#include "tests/backends/nccl/gpu_world_size_test.h"
#include "tests/backends/nccl/gpu_reference.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace testing {
namespace {

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                                DType::kUInt8,   DType::kInt32,   DType::kInt64,   DType::kBool};

std::vector<Tensor> every_rank_input(int size, int64_t n, DType dtype, ReduceOp op = ReduceOp::SUM) {
  std::vector<Tensor> inputs;
  for (int r = 0; r < size; ++r) inputs.push_back(rank_input(r, n, dtype, op));
  return inputs;
}

// Rank r's input, concatenated for every rank: what all_gather should produce.
Tensor concatenated(const std::vector<Tensor>& parts) {
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.numel();
  Tensor out = Tensor::empty({total}, parts[0].dtype());
  int64_t offset = 0;
  for (const Tensor& p : parts) {
    out.flat_slice(offset, p.numel()).copy_from(p);
    offset += p.numel();
  }
  return out;
}

class NcclCudaOpsTest : public GpuWorldSizeTest {};

TEST_P(NcclCudaOpsTest, AllReduceEveryDTypeAndReduction) {
  run_gpu_group(GetParam(), "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : reductions_for(dtype)) {
        for (int64_t n : {0, 1, 7, 1000}) {
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + op.name() + " n=" + std::to_string(n));
          const auto inputs = every_rank_input(pg.size(), n, dtype, op);
          CudaTensor t(inputs[pg.rank()], device);
          AllReduceOptions o;
          o.op = op;
          pg.all_reduce(t.tensor(), o)->wait();
          EXPECT_EQ(compare(t.to_host(), reference_reduce(inputs, op)), "");
        }
      }
    }
    // One large buffer: NCCL picks other algorithms and protocols for it.
    const auto big = every_rank_input(pg.size(), 1 << 22, DType::kFloat32);
    CudaTensor t(big[pg.rank()], device);
    pg.all_reduce(t.tensor())->wait();
    EXPECT_EQ(compare(t.to_host(), reference_reduce(big, ReduceOp::SUM)), "");
  });
}

TEST_P(NcclCudaOpsTest, RootedCollectivesWithTheLastRankAsRoot) {
  run_gpu_group(GetParam(), "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    const int root = pg.size() - 1;
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt64}) {
      SCOPED_TRACE(dtype_name(dtype));
      const auto inputs = every_rank_input(pg.size(), 513, dtype);

      CudaTensor b(inputs[pg.rank()], device);
      BroadcastOptions bo;
      bo.root = root;
      pg.broadcast(b.tensor(), bo)->wait();
      EXPECT_EQ(compare(b.to_host(), inputs[root]), "");

      CudaTensor r(inputs[pg.rank()], device);
      ReduceOptions ro;
      ro.root = root;
      ro.op = ReduceOp::MAX;
      pg.reduce(r.tensor(), ro)->wait();
      // The root gets the result; the others keep their input.
      EXPECT_EQ(compare(r.to_host(), pg.rank() == root ? reference_reduce(inputs, ReduceOp::MAX) : inputs[pg.rank()]),
                "");

      // gather and scatter of CUDA tensors, through the backend (the group's list forms
      // pack on the host).
      const int64_t n = inputs[0].numel();
      Backend& nccl = pg.backend_for(DeviceType::kCUDA);
      CudaTensor in(inputs[pg.rank()], device);
      CudaTensor gathered = CudaTensor::zeros({pg.rank() == root ? n * pg.size() : 0}, dtype, device);
      Tensor none;
      GatherOptions go;
      go.root = root;
      OpContext ctx;
      ctx.seq = 1000;
      ctx.timeout = std::chrono::milliseconds(60000);
      nccl.gather(pg.rank() == root ? gathered.tensor() : none, in.tensor(), go, ctx)->wait();
      if (pg.rank() == root) {
        EXPECT_EQ(compare(gathered.to_host(), concatenated(inputs)), "");
      }

      CudaTensor source(concatenated(inputs), device);
      CudaTensor part = CudaTensor::zeros({n}, dtype, device);
      ScatterOptions so;
      so.root = root;
      ctx.seq = 1001;
      nccl.scatter(part.tensor(), pg.rank() == root ? source.tensor() : none, so, ctx)->wait();
      EXPECT_EQ(compare(part.to_host(), inputs[pg.rank()]), "");
    }
  });
}

TEST_P(NcclCudaOpsTest, AllGatherReduceScatterAndUnevenAllToAll) {
  run_gpu_group(GetParam(), "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    const int size = pg.size();
    const auto inputs = every_rank_input(size, 9, DType::kFloat16);

    CudaTensor in(inputs[pg.rank()], device);
    CudaTensor gathered = CudaTensor::zeros({9 * size}, DType::kFloat16, device);
    pg.all_gather_into_tensor(gathered.tensor(), in.tensor())->wait();
    EXPECT_EQ(compare(gathered.to_host(), concatenated(inputs)), "");

    // reduce_scatter: rank r gets the sum of block r of every rank's input.
    const auto big = every_rank_input(size, 9 * size, DType::kFloat32);
    CudaTensor rs_in(big[pg.rank()], device);
    CudaTensor rs_out = CudaTensor::zeros({9}, DType::kFloat32, device);
    pg.reduce_scatter_tensor(rs_out.tensor(), rs_in.tensor())->wait();
    EXPECT_EQ(compare(rs_out.to_host(), reference_reduce(big, ReduceOp::SUM).flat_slice(9 * pg.rank(), 9)), "");

    // Uneven all_to_all: rank r sends p + 1 rows of 3 to rank p, so it gets r + 1 rows
    // from everyone; row values say who sent them to whom.
    std::vector<int64_t> in_split(size), out_split(size, pg.rank() + 1);
    std::iota(in_split.begin(), in_split.end(), 1);
    const int64_t in_rows = std::accumulate(in_split.begin(), in_split.end(), int64_t{0});
    Tensor send = Tensor::empty({in_rows, 3}, DType::kInt32);
    for (int p = 0, row = 0; p < size; ++p) {
      for (int k = 0; k <= p; ++k, ++row) {
        for (int c = 0; c < 3; ++c) send.set_item(row * 3 + c, pg.rank() * 100 + p * 10 + c);
      }
    }
    Tensor expect = Tensor::empty({size * (pg.rank() + 1), 3}, DType::kInt32);
    for (int src = 0, row = 0; src < size; ++src) {
      for (int k = 0; k <= pg.rank(); ++k, ++row) {
        for (int c = 0; c < 3; ++c) expect.set_item(row * 3 + c, src * 100 + pg.rank() * 10 + c);
      }
    }
    CudaTensor a2a_in(send, device);
    CudaTensor a2a_out = CudaTensor::zeros(expect.shape(), DType::kInt32, device);
    pg.all_to_all_single(a2a_out.tensor(), a2a_in.tensor(), out_split, in_split)->wait();
    EXPECT_EQ(compare(a2a_out.to_host(), expect), "");
  });
}

TEST_P(NcclCudaOpsTest, SendRecvBetweenPairsAndBarrier) {
  if (GetParam() < 2) GTEST_SKIP() << "send and recv need a peer: 2 ranks or more (this case is for 1 rank)";
  run_gpu_group(GetParam(), "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    pg.barrier()->wait();
    // Pairs (0,1), (2,3): the even rank sends first, the odd one receives first.
    const int peer = pg.rank() ^ 1;
    if (peer >= pg.size()) return;
    const Tensor mine = rank_input(pg.rank(), 1 << 16, DType::kFloat64);
    CudaTensor out(mine, device);
    CudaTensor in = CudaTensor::zeros({1 << 16}, DType::kFloat64, device);
    if (pg.rank() % 2 == 0) {
      pg.send(out.tensor(), peer)->wait();
      pg.recv(in.tensor(), peer)->wait();
    } else {
      pg.recv(in.tensor(), peer)->wait();
      pg.send(out.tensor(), peer)->wait();
    }
    EXPECT_EQ(compare(in.to_host(), rank_input(peer, 1 << 16, DType::kFloat64)), "");
    pg.barrier()->wait();
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, NcclCudaOpsTest, ::testing::Values(1, 2, 3, 4), world_size_name);

}  // namespace
}  // namespace testing
}  // namespace distcomm
