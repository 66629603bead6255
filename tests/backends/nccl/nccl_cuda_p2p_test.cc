// Point to point on a real GPU: a send and a collective issued in opposite orders on two
// ranks both complete (a pair's communicator runs on its own stream), a ring of sends
// and receives in one batch_isend_irecv completes where separate calls would deadlock,
// and a send meets a peer's batched receive (both use the pair's communicator).
// Messages are large enough (64 MiB) that a send cannot finish before its receive starts.
// Two and three ranks run on one GPU with DISTCOMM_TEST_SHARE_GPU=1.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/backends/nccl/cuda_tensor.h"
#include "tests/backends/nccl/cuda_test_env.h"
#include "tests/testing/require.h"
#include "tests/backends/nccl/gpu_group.h"
#include "tests/backends/nccl/gpu_reference.h"

namespace distcomm {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int64_t kLarge = int64_t{16} << 20;  // float32 elements: 64 MiB

// Polls until w ends (at most `limit`): a deadlock on the GPU shows as the watchdog's
// timeout, not as a hang.
void expect_success(const WorkPtr& w, const char* what, std::chrono::seconds limit = 60s) {
  const auto deadline = Clock::now() + limit;
  while (!w->is_completed() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(w->is_completed()) << what << " still running";
  if (std::exception_ptr e = w->exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      ADD_FAILURE() << what << ": " << x.what();
    }
  }
}

TEST(NcclP2PTest, ASendAndACollectiveInOppositeOrdersBothComplete) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  run_gpu_group(2, "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    const int peer = 1 - pg.rank();
    CudaTensor message = pg.rank() == 0 ? CudaTensor(rank_input(0, kLarge, DType::kFloat32), device)
                                        : CudaTensor::zeros({kLarge}, DType::kFloat32, device);
    const auto inputs = std::vector<Tensor>{rank_input(0, kLarge, DType::kFloat32), rank_input(1, kLarge, DType::kFloat32)};
    CudaTensor summed(inputs[pg.rank()], device);
    // Communicators are set up by their first op, which waits for the peers: the first
    // use of each comes in the same order on both ranks.
    CudaTensor small = CudaTensor::zeros({4}, DType::kFloat32, device);
    pg.all_reduce(small.tensor())->wait();
    if (pg.rank() == 0) {
      pg.send(small.tensor(), peer)->wait();
    } else {
      pg.recv(small.tensor(), peer)->wait();
    }
    P2POptions p2p;
    p2p.timeout = 30000ms;
    AllReduceOptions ar;
    ar.timeout = 30000ms;
    WorkPtr first, second;
    if (pg.rank() == 0) {
      first = pg.send(message.tensor(), peer, p2p);
      second = pg.all_reduce(summed.tensor(), ar);
    } else {
      first = pg.all_reduce(summed.tensor(), ar);
      second = pg.recv(message.tensor(), peer, p2p);
    }
    expect_success(first, "the first op");
    expect_success(second, "the second op");
    EXPECT_EQ(compare(summed.to_host(), reference_reduce(inputs, ReduceOp::SUM)), "");
    if (pg.rank() == 1) {
      EXPECT_EQ(compare(message.to_host(), inputs[0]), "");
    }
  });
}

// The ring runs in rounds; the first batch sets up the pair communicators of each rank's
// two peers (in pair order, so the ring does not wait in a circle).
TEST(NcclP2PTest, ARingOfSendsAndReceivesInOneBatch) {
  const std::string why = missing_gpus(2);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  const int world = gpu_ranks_that_fit(3);
  run_gpu_group(world, "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    const int next = (pg.rank() + 1) % pg.size(), prev = (pg.rank() + pg.size() - 1) % pg.size();
    for (int64_t n : {int64_t{1}, int64_t{1000}, kLarge}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      CudaTensor out(rank_input(pg.rank(), n, DType::kFloat32), device);
      CudaTensor in = CudaTensor::zeros({n}, DType::kFloat32, device);
      // Receive before send in the list: inside one batch the order does not matter.
      std::vector<P2POp> ops{P2POp::recv(in.tensor(), prev), P2POp::send(out.tensor(), next)};
      P2POptions o;
      o.timeout = 30000ms;
      WorkPtr w = pg.batch_isend_irecv(ops, o);
      expect_success(w, "the batch");
      EXPECT_EQ(compare(in.to_host(), rank_input(prev, n, DType::kFloat32)), "");
    }
    // The group's collectives go on, on the group's communicator.
    CudaTensor t(Tensor::of<float>({1.0f}), device);
    pg.all_reduce(t.tensor())->wait();
    EXPECT_EQ(t.to_host().item(0), 1.0 * pg.size());
  });
}

// Issue 31 #7: a plain send or recv and a peer's batch_isend_irecv are on the same pair
// communicator, so they meet (the batch used to run on the group's, and both hung until
// the timeout). Rank 0 sends to ranks 1 and 2 in one batch and receives from 1 with a
// plain recv; rank 1 receives with a plain recv and sends back in a one-op batch; rank 2
// receives in a batch. 64 MiB: no send ends before its receive has begun.
TEST(NcclP2PTest, ASendMeetsAPeersBatchedReceiveAndTheOtherWayRound) {
  const std::string why = missing_gpus(3);
  if (!why.empty()) DISTCOMM_SKIP_WITHOUT(gpu_requirement()) << why;
  run_gpu_group(3, "nccl", [](ProcessGroup& pg) {
    const int device = test_device_of_rank(pg.rank());
    P2POptions o;
    o.timeout = 30000ms;
    for (int64_t n : {int64_t{3}, kLarge}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      CudaTensor mine(rank_input(pg.rank(), n, DType::kFloat32), device);
      CudaTensor got = CudaTensor::zeros({n}, DType::kFloat32, device);
      if (pg.rank() == 0) {
        std::vector<P2POp> out{P2POp::send(mine.tensor(), 1), P2POp::send(mine.tensor(), 2)};
        WorkPtr sent = pg.batch_isend_irecv(out, o);
        WorkPtr back = pg.recv(got.tensor(), 1, o);
        expect_success(sent, "rank 0's batch of two sends");
        expect_success(back, "rank 0's recv from the batch of rank 1");
        EXPECT_EQ(compare(got.to_host(), rank_input(1, n, DType::kFloat32)), "");
      } else if (pg.rank() == 1) {
        expect_success(pg.recv(got.tensor(), 0, o), "rank 1's recv from a batch");
        EXPECT_EQ(compare(got.to_host(), rank_input(0, n, DType::kFloat32)), "");
        std::vector<P2POp> back{P2POp::send(mine.tensor(), 0)};
        expect_success(pg.batch_isend_irecv(back, o), "rank 1's batch of one send");
      } else {
        std::vector<P2POp> in{P2POp::recv(got.tensor(), 0)};
        expect_success(pg.batch_isend_irecv(in, o), "rank 2's batch of one recv");
        EXPECT_EQ(compare(got.to_host(), rank_input(0, n, DType::kFloat32)), "");
      }
    }
  });
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
