// Construction: ranks that wrap different parameters all get the same InvalidArgument
// naming the parameter and the ranks (and the group stays usable); rank 0's parameters and
// buffers reach every rank; misuse is reported clearly; statistics are logged in rank order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "api/errors.h"
#include "examples/nn/loss.h"
#include "examples/nn/synthetic_data.h"
#include "tests/ddp/training.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace ddp {
namespace test {
namespace {

// Constructs DDP, expecting InvalidArgument whose message contains every piece.
void expect_construction_error(ProcessGroup& pg, std::vector<NamedParameter> params,
                               const std::vector<std::string>& pieces, DdpOptions options = {}) {
  try {
    DistributedDataParallel ddp(pg, std::move(params), options);
    ADD_FAILURE() << "rank " << pg.rank() << ": no error";
  } catch (const InvalidArgument& e) {
    for (const std::string& piece : pieces) {
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << "missing '" << piece << "' in: " << e.what();
    }
  }
}

TEST(DdpConstruction, MismatchedParametersFailOnEveryRankNamingThem) {
  distcomm::testing::run_group(3, "gloo", [](ProcessGroup& pg) {
    Problem p;
    // Rank 2 has a wider hidden layer: fc0 and fc1 differ in shape.
    Problem wider = p;
    wider.widths[1] += 1;
    auto model = make_model(pg.rank() == 2 ? wider : p, pg.rank());
    expect_construction_error(pg, ddp_parameters(*model),
                              {"entry 0: parameter 'fc0.weight' float32[16, 48] on cpu on ranks 0, 1; "
                               "parameter 'fc0.weight' float32[16, 49] on cpu on rank 2",
                               "rank " + std::to_string(pg.rank()) + "/3"});

    // Rank 1 wraps one parameter fewer.
    auto same = make_model(p, pg.rank());
    auto params = ddp_parameters(*same);
    if (pg.rank() == 1) params.pop_back();
    expect_construction_error(pg, params, {"6 on ranks 0, 2; 5 on rank 1"});

    // A problem only rank 1 can see (a gradient of the wrong shape) still fails all ranks.
    Tensor bad_grad = Tensor::zeros({3});
    params = ddp_parameters(*same);
    if (pg.rank() == 1) params[2].grad = &bad_grad;
    expect_construction_error(pg, params, {"on rank 1: parameter 2 ('fc1.weight'): grad float32[3] on cpu does not "
                                           "match value float32[48, 48] on cpu"});

    // Bad options: every rank says which.
    DdpOptions bad;
    bad.bucket_cap_mb = -1;
    expect_construction_error(pg, ddp_parameters(*same), {"bucket_cap_mb must be a finite size"}, bad);

    // After all that the ranks are still in step.
    DistributedDataParallel ddp(pg, ddp_parameters(*same));
    EXPECT_EQ(ddp.num_parameters(), 6u);
  });
}

TEST(DdpConstruction, RankZerosParametersAndBuffersReachEveryRank) {
  distcomm::testing::run_group(3, "gloo", [](ProcessGroup& pg) {
    Problem p;
    auto model = make_model(p, pg.rank());
    auto rank0 = make_model(p, 0);
    Tensor running_mean = Tensor::of<float>({1.0f * pg.rank(), 10.0f + pg.rank()});
    Tensor steps = Tensor::of<int64_t>({100 + pg.rank()});
    DistributedDataParallel ddp(pg, ddp_parameters(*model), {},
                                {{"running_mean", &running_mean}, {"steps", &steps}});
    const auto params = model->parameters(), expected = rank0->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i]->value.to_doubles(), expected[i]->value.to_doubles()) << params[i]->name;
    }
    EXPECT_EQ(running_mean.to_doubles(), (std::vector<double>{0, 10}));
    EXPECT_EQ(steps.item(0), 100);
    // broadcast_buffers: a buffer that drifted on one rank is rank 0's again after a step.
    running_mean.set_item(0, 42.0 + pg.rank());
    const nn::Dataset data = nn::make_regression(12, 16, 4, 7);
    Tensor out = model->forward(nn::rows(data.inputs, pg.rank() * 4, 4));
    model->backward(nn::mse_loss(out, nn::rows(data.targets, pg.rank() * 4, 4)).grad,
                    [&](size_t i) { ddp.mark_grad_ready(params[i]->name); });
    ddp.finish_backward();
    EXPECT_EQ(running_mean.item(0), 42.0);
  });
}

TEST(DdpConstruction, MisuseIsReportedClearly) {
  distcomm::testing::run_group(1, "gloo", [](ProcessGroup& pg) {
    auto model = make_model(Problem(), 0);
    DistributedDataParallel ddp(pg, ddp_parameters(*model));
    EXPECT_THROW(ddp.mark_grad_ready(6), InvalidArgument);
    EXPECT_THROW(ddp.mark_grad_ready("fc9.weight"), InvalidArgument);
    ddp.mark_grad_ready(3);
    try {
      ddp.mark_grad_ready(3);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'fc1.bias' (parameter 3) was marked ready twice"), std::string::npos)
          << e.what();
    }
  });
}

// Runs fn with this process's stdout going to a file; returns what was written.
std::string capture_stdout(const std::function<void()>& fn) {
  char path[] = "/tmp/ddp_log_XXXXXX";
  const int file = mkstemp(path);
  std::fflush(stdout);
  const int saved = dup(STDOUT_FILENO);
  dup2(file, STDOUT_FILENO);
  fn();
  std::fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  return text.str();
}

TEST(DdpConstruction, StatisticsAreLoggedInRankOrderEveryNIterations) {
  distcomm::testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    auto model = make_model(Problem(), pg.rank());
    DdpOptions options;
    options.log_every_n = 2;
    options.bucket_cap_mb = 0.001;
    DistributedDataParallel ddp(pg, ddp_parameters(*model), options);
    const nn::Dataset data = nn::make_regression(8, 16, 4, 7);
    const std::string log = capture_stdout([&] {
      for (int iteration = 0; iteration < 4; ++iteration) {
        Tensor out = model->forward(nn::rows(data.inputs, pg.rank() * 4, 4));
        model->backward(nn::mse_loss(out, nn::rows(data.targets, pg.rank() * 4, 4)).grad,
                        [&](size_t i) { ddp.mark_grad_ready(i); });
        ddp.finish_backward();
      }
    });
    if (pg.rank() != 0) {
      EXPECT_EQ(log, "");  // rank 0 prints for everyone
      return;
    }
    std::vector<std::string> lines;
    std::stringstream in(log);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    ASSERT_EQ(lines.size(), 4u) << log;
    const char* expected[] = {"[rank 0/2] DDP iteration 2: 2 buckets", "[rank 1/2] DDP iteration 2: 2 buckets",
                              "[rank 0/2] DDP iteration 4: 2 buckets", "[rank 1/2] DDP iteration 4: 2 buckets"};
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(lines[i].rfind(expected[i], 0), 0u) << lines[i];
      EXPECT_NE(lines[i].find("overlapped with backward"), std::string::npos) << lines[i];
    }
  });
}

}  // namespace
}  // namespace test
}  // namespace ddp
}  // namespace distcomm
