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

// Device copies of host tensors, and the device tensors a list form takes.
struct CudaList {
  std::vector<CudaTensor> owned;
  std::vector<Tensor> tensors;
  CudaList(const std::vector<Tensor>& hosts, int device) {
    owned.reserve(hosts.size());
    for (const Tensor& h : hosts) owned.emplace_back(h, device);
    for (CudaTensor& c : owned) tensors.push_back(c.tensor());
  }
  // `count` tensors of n zeros.
  static CudaList zeros(const std::vector<int64_t>& counts, DType dtype, int device) {
    std::vector<Tensor> hosts;
    for (int64_t n : counts) hosts.push_back(Tensor::zeros({n}, dtype));
    return CudaList(hosts, device);
  }
};

// Rank r's input of n * size elements cut in size blocks: block k is what rank r gives
// for rank k.
std::vector<Tensor> blocks_of(const Tensor& whole, int size) {
  const int64_t n = whole.numel() / size;
  std::vector<Tensor> blocks;
  for (int k = 0; k < size; ++k) blocks.push_back(whole.flat_slice(k * n, n));
  return blocks;
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

      // gather and scatter of CUDA tensors into and from one tensor, through the backend
      // (the group's own gather and scatter take lists).
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

// The list forms of CUDA tensors go whole to NCCL (Backend::list_ops, ABI 1.6): every
// block moves straight between the callers' tensors, one NCCL group per op, one sequence
// number per op. Empty tensors (n = 0) are skipped alike on every rank.
TEST_P(NcclCudaOpsTest, ListFormsMoveEveryBlockBetweenTheCallersTensors) {
  run_gpu_group(GetParam(), "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    const int size = pg.size(), me = pg.rank(), root = size - 1;
    for (int64_t n : {int64_t{0}, int64_t{9}, int64_t{1} << 16}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      const uint64_t seq0 = pg.next_seq();
      const auto inputs = every_rank_input(size, n, DType::kFloat16);
      const std::vector<int64_t> each(static_cast<size_t>(size), n);

      CudaTensor in(inputs[me], device);
      CudaList gathered = CudaList::zeros(each, DType::kFloat16, device);
      WorkPtr w = pg.all_gather(gathered.tensors, in.tensor());
      w->wait();
      EXPECT_EQ(w->op(), OpType::kAllGather);
      for (int k = 0; k < size; ++k) EXPECT_EQ(compare(gathered.owned[k].to_host(), inputs[k]), "") << "from " << k;

      GatherOptions go;
      go.root = root;
      CudaList at_root = CudaList::zeros(me == root ? each : std::vector<int64_t>{}, DType::kFloat16, device);
      pg.gather(at_root.tensors, in.tensor(), go)->wait();
      for (size_t k = 0; k < at_root.owned.size(); ++k) EXPECT_EQ(compare(at_root.owned[k].to_host(), inputs[k]), "");

      ScatterOptions so;
      so.root = 0;
      CudaList sources(me == 0 ? inputs : std::vector<Tensor>{}, device);
      CudaTensor part = CudaTensor::zeros({n}, DType::kFloat16, device);
      pg.scatter(part.tensor(), sources.tensors, so)->wait();
      EXPECT_EQ(compare(part.to_host(), inputs[me]), "");

      // reduce_scatter from a list, as the tensor form's blocks: rank r gets block r of
      // the reduction of every rank's whole input.
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX, ReduceOp::AVG}) {
        SCOPED_TRACE(op.name());
        const auto wholes = every_rank_input(size, n * size, DType::kFloat32, op);
        CudaList blocks(blocks_of(wholes[me], size), device);
        CudaTensor reduced = CudaTensor::zeros({n}, DType::kFloat32, device);
        ReduceScatterOptions ro;
        ro.op = op;
        pg.reduce_scatter(reduced.tensor(), blocks.tensors, ro)->wait();
        EXPECT_EQ(compare(reduced.to_host(), reference_reduce(wholes, op).flat_slice(me * n, n)), "");
        // The inputs are the caller's: NCCL's reduce leaves them as they were.
        for (int k = 0; k < size; ++k) EXPECT_EQ(compare(blocks.owned[k].to_host(), blocks_of(wholes[me], size)[k]), "");
      }
      EXPECT_EQ(pg.next_seq(), seq0 + 6) << "one sequence number per list op";
    }

    // all_to_all of lists, uneven: rank r sends p elements to rank p (none to rank 0),
    // so it gets r elements from everyone; values say who sent them to whom.
    std::vector<Tensor> outgoing, expected;
    for (int p = 0; p < size; ++p) {
      outgoing.push_back(Tensor::zeros({p}, DType::kInt32));
      outgoing.back().fill(me * 100 + p);
      expected.push_back(Tensor::zeros({me}, DType::kInt32));
      expected.back().fill(p * 100 + me);
    }
    CudaList sent(outgoing, device);
    CudaList received = CudaList::zeros(std::vector<int64_t>(static_cast<size_t>(size), me), DType::kInt32, device);
    WorkPtr a2a = pg.all_to_all(received.tensors, sent.tensors);
    a2a->wait();
    EXPECT_EQ(a2a->op(), OpType::kAllToAll);
    for (int p = 0; p < size; ++p) EXPECT_EQ(compare(received.owned[p].to_host(), expected[p]), "") << "from " << p;
  });
}

TEST_P(NcclCudaOpsTest, SendRecvBetweenPairsAndBarrier) {
  if (GetParam() < 2) GTEST_SKIP() << "send and recv need a peer: 2 ranks or more (this case is for 1 rank)";
  run_gpu_group(GetParam(), "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    pg.barrier()->wait();
    // Pairs (0,1), (2,3): the even rank sends first, the odd one receives first.
    // With an odd number of ranks the last one has no partner; it still takes part in the
    // closing barrier (leaving early would fail its peers' barrier).
    const int peer = pg.rank() ^ 1;
    if (peer < pg.size()) {
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
    }
    pg.barrier()->wait();
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, NcclCudaOpsTest, ::testing::Values(1, 2, 3, 4), world_size_name);

}  // namespace
}  // namespace testing
}  // namespace distcomm
