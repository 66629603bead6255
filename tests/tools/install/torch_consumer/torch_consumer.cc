// A libtorch program from outside distcomm's repository, built against an installed distcomm
// (once with CMake's distcomm::torch, once with pkg-config's distcomm-torch; see
// install_torch_test.sh). At 2 ranks: the all_reduce of a torch tensor (rank r holds r + 1:
// the sum is 3), then one DDP step of a torch::nn::Linear (rank 0's weight is broadcast;
// rank r's input is r + 1, so its gradient is r + 1 and the average 1.5).
//
// It includes libtorch's narrow headers, not torch/torch.h, to compile in seconds less.
#include <ATen/core/grad_mode.h>
#include <ATen/ops/full.h>
#include <torch/nn/modules/linear.h>

#include <distcomm/api/init.h>
#include <distcomm/api/logging.h>
#include <distcomm/api/run_main.h>
#include <distcomm/integrations/torch/distributed_data_parallel.h>
#include <distcomm/integrations/torch/tensor_bridge.h>

#include <sstream>
#include <string>

namespace {

std::string values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  std::ostringstream out;
  for (int64_t i = 0; i < c.numel(); ++i) out << (i ? " " : "") << c.data_ptr<float>()[i];
  return out.str();
}

}  // namespace

int main() {
  return distcomm::run_main("torch_consumer", [] {
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group();
    const int rank = pg->rank();
    const std::string who = "Rank " + std::to_string(rank);

    at::Tensor t = at::full({3}, rank + 1.0);
    distcomm::Tensor view = distcomm::torch::as_tensor(t);  // t's memory, no copy
    pg->all_reduce(view)->wait();
    distcomm::ordered_print(*pg, who + " has " + values(t), /*prefix=*/false);

    torch::nn::Linear linear(torch::nn::LinearOptions(2, 1).bias(false));
    {
      at::NoGradGuard no_grad;
      linear->weight.fill_(10.0 * (rank + 1));  // DDP replaces it with rank 0's
    }
    distcomm::torch::DistributedDataParallel ddp(*pg, linear.ptr());
    linear->forward(at::full({1, 2}, rank + 1.0)).sum().backward();  // ends the DDP pass
    distcomm::ordered_print(*pg, who + " weight " + values(linear->weight), /*prefix=*/false);
    distcomm::ordered_print(*pg, who + " averaged gradient " + values(linear->weight.grad()), /*prefix=*/false);
    return 0;
  });
}
