// ProcessGroup ops on torch tensors through the zero-copy bridge: real ranks (forked
// processes) over the gloo plugin, 2 and 3 ranks; results land in the torch tensors' memory.
//The parent process does no torch computation before it forks the ranks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "api/process_group.h"
#include "integrations/torch/tensor_bridge.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace torch {
namespace {

class TorchCollectives : public ::testing::TestWithParam<int> {};

TEST_P(TorchCollectives, AllReduceInEveryFloatingDTypeAndInt64) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const int n = pg.size();
    for (c10::ScalarType type : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong}) {
      // Rank r holds r + 1, r + 2, ...: the sum of element i is n(n+1)/2 + n*i.
      at::Tensor t = at::arange(8, at::TensorOptions().dtype(type)).add_(pg.rank() + 1);
      Tensor view = as_tensor(t);
      pg.all_reduce(view)->wait();
      for (int64_t i = 0; i < 8; ++i) {
        EXPECT_EQ(t[i].item<double>(), n * (n + 1) / 2.0 + n * i) << c10::toString(type) << " element " << i;
      }
    }
  });
}

TEST_P(TorchCollectives, BroadcastGatherAndPointToPoint) {
  distcomm::testing::run_group(GetParam(), "gloo", [](ProcessGroup& pg) {
    const int n = pg.size(), rank = pg.rank();
    at::Tensor weights = rank == 0 ? at::linspace(-1, 1, 12).reshape({3, 4}) : at::zeros({3, 4});
    Tensor w = as_tensor(weights);
    pg.broadcast(w)->wait();
    EXPECT_TRUE(at::equal(weights, at::linspace(-1, 1, 12).reshape({3, 4})));

    // all_gather into a torch tensor: row r is rank r's contribution.
    at::Tensor mine = at::full({2}, static_cast<int>(rank * 10), at::kInt);
    at::Tensor all = at::empty({n, 2}, at::kInt);
    Tensor all_view = as_tensor(all);
    pg.all_gather_into_tensor(all_view, as_tensor(mine))->wait();
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r][1].item<int>(), r * 10);

    // A ring of send/recv; the received tensor comes back to torch through from_tensor.
    Tensor incoming = Tensor::zeros({3}, DType::kBFloat16);
    at::Tensor outgoing = at::full({3}, static_cast<float>(rank), at::kBFloat16);
    WorkPtr sent = pg.send(as_tensor(outgoing), (rank + 1) % n);
    pg.recv(incoming, (rank + n - 1) % n)->wait();
    sent->wait();
    EXPECT_TRUE(at::equal(from_tensor(incoming), at::full({3}, static_cast<float>((rank + n - 1) % n), at::kBFloat16)));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TorchCollectives, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace torch
}  // namespace distcomm
