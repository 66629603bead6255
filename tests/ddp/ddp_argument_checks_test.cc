// What the constructor refuses on one rank's arguments, on every rank, and that each message
// carries only the advice that fits it: invalid options and missing parameters are not told
// to "build the model identically"; integer and bool parameters are refused (as PyTorch,
// where only floating-point tensors may require grad: an averaged integer gradient
// truncates); tied weights (one tensor under two names) are refused naming both names; a
// parameter one rank has more is named. 3 ranks over the in_process test plugin.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "api/errors.h"
#include "ddp/distributed_data_parallel.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace ddp {
namespace {

using distcomm::testing::in_process_world;
using distcomm::testing::on_every_rank;

struct Model {
  std::deque<Tensor> values, grads;  // deque: the pointers in params stay valid
  std::vector<NamedParameter> params;
  void add(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::kFloat32) {
    values.push_back(Tensor::zeros(shape, dtype));
    grads.push_back(Tensor::zeros(shape, dtype));
    params.push_back({name, &values.back(), &grads.back()});
  }
};

// What constructing DDP throws on this rank ("" when it does not).
std::string construction_error(ProcessGroup& pg, const std::vector<NamedParameter>& params,
                               const DdpOptions& options = {}, std::vector<NamedBuffer> buffers = {}) {
  try {
    DistributedDataParallel ddp(pg, params, options, std::move(buffers));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

constexpr const char* kModelAdvice = "build the model identically on every rank";

void expect_has(const std::string& m, const std::string& piece) {
  EXPECT_NE(m.find(piece), std::string::npos) << "missing '" << piece << "' in: " << m;
}

TEST(DdpArgumentChecks, EachErrorCarriesOnlyTheAdviceThatFitsIt) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    Model m;
    m.add("a", {10});
    DdpOptions negative;
    negative.bucket_cap_mb = -1;
    std::string e = construction_error(pg, m.params, negative);
    expect_has(e, "invalid arguments on rank 0: bucket_cap_mb must be a finite size");
    expect_has(e, "on rank 2: bucket_cap_mb");
    EXPECT_EQ(e.find(kModelAdvice), std::string::npos) << e;
    EXPECT_EQ(e.find("invalid parameters"), std::string::npos) << "an option is no parameter: " << e;

    e = construction_error(pg, {});
    expect_has(e, "no parameters: there are no gradients to synchronise");
    EXPECT_EQ(e.find(kModelAdvice), std::string::npos) << e;

    Tensor b0 = Tensor::zeros({2}), b1 = Tensor::zeros({2});
    e = construction_error(pg, m.params, {}, {{"stat", &b0}, {"stat", &b1}});
    expect_has(e, "buffer 1 ('stat'): the name 'stat' is used twice");
    EXPECT_EQ(e.find(kModelAdvice), std::string::npos) << e;

    // A model that differs keeps its advice.
    Model other;
    other.add("a", {pg.rank() == 1 ? 11 : 10});
    e = construction_error(pg, other.params);
    expect_has(e, "entry 0: parameter 'a' float32[10] on cpu on ranks 0, 2; parameter 'a' float32[11] on cpu on rank 1");
    expect_has(e, kModelAdvice);
    EXPECT_EQ(e.find("DdpOptions"), std::string::npos) << e;
  });
}

TEST(DdpArgumentChecks, IntegerAndBoolParametersAreRefusedNamingThem) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    for (DType dtype : {DType::kInt64, DType::kInt32, DType::kUInt8, DType::kBool}) {
      SCOPED_TRACE(dtype_name(dtype));
      Model m;
      m.add("a", {4});
      m.add("count", {4}, dtype);
      const std::string e = construction_error(pg, m.params);
      expect_has(e, std::string("parameter 1 ('count'): a parameter must be floating point, got ") + dtype_name(dtype));
      expect_has(e, "pass integer state as a buffer");
    }
    // As a buffer it is fine.
    Model m;
    m.add("a", {4});
    Tensor steps = Tensor::zeros({1}, DType::kInt64);
    EXPECT_EQ(construction_error(pg, m.params, {}, {{"steps", &steps}}), "");
  });
}

TEST(DdpArgumentChecks, TiedWeightsUnderTwoNamesAreRefusedNamingBoth) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    Model m;
    m.add("a", {4});
    m.add("embedding.weight", {20});
    // The same value and gradient under a second name, as a tied output layer.
    m.params.push_back({"decoder.weight", m.params[1].value, m.params[1].grad});
    std::string e = construction_error(pg, m.params);
    expect_has(e, "parameters 1 ('embedding.weight') and 2 ('decoder.weight') share memory (their gradients, "
                  "their values)");
    expect_has(e, "must be passed once, under one name");

    // A gradient that is a view into another's memory (a slice of it) is the same defect.
    Model views;
    views.add("a", {8});
    views.add("b", {4});
    Tensor slice = views.grads[0].flat_slice(4, 4);
    views.params[1].grad = &slice;
    e = construction_error(pg, views.params);
    expect_has(e, "parameters 0 ('a') and 1 ('b') share memory (their gradients)");

    // Every pair is named, also two that overlap inside a third (helper-78: the sweep
    // compared each only with the widest before it, and missed b with c).
    Model nested;
    nested.add("a", {100});
    nested.add("b", {10});
    nested.add("c", {15});
    Tensor b_grad = nested.grads[0].flat_slice(10, 10);
    Tensor c_grad = nested.grads[0].flat_slice(15, 15);
    nested.params[1].grad = &b_grad;
    nested.params[2].grad = &c_grad;
    e = construction_error(pg, nested.params);
    expect_has(e, "parameters 0 ('a') and 1 ('b') share memory (their gradients)");
    expect_has(e, "parameters 0 ('a') and 2 ('c') share memory (their gradients)");
    expect_has(e, "parameters 1 ('b') and 2 ('c') share memory (their gradients)");
  });
}

TEST(DdpArgumentChecks, AParameterOneRankHasMoreIsNamed) {
  auto world = in_process_world(3);
  on_every_rank(world, [](ProcessGroup& pg) {
    Model m;
    m.add("a", {10});
    m.add("b", {20});
    if (pg.rank() == 1) m.add("extra", {3});
    std::string e = construction_error(pg, m.params);
    expect_has(e, "the ranks hold different numbers of tensors: 2 on ranks 0, 2; 3 on rank 1; "
                  "entry 2: no tensor on ranks 0, 2; parameter 'extra' float32[3] on cpu on rank 1");

    Model fewer;
    fewer.add("a", {10});
    if (pg.rank() != 2) fewer.add("b", {20});
    e = construction_error(pg, fewer.params);
    expect_has(e, "entry 1: parameter 'b' float32[20] on cpu on ranks 0, 1; no tensor on rank 2");
  });
}

}  // namespace
}  // namespace ddp
}  // namespace distcomm
