// The zero-copy bridge between at::Tensor and distcomm::Tensor: dtypes and devices map both
// ways, both directions share memory and keep it alive, and tensors distcomm cannot move
// as one dense block are refused with the fix in the message. One process, no communication.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "api/errors.h"
#include "integrations/torch/tensor_bridge.h"

namespace distcomm {
namespace torch {
namespace {

std::string message_of(const at::Tensor& t) {
  try {
    as_tensor(t);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TensorBridge, EveryDTypeMapsBothWays) {
  const std::pair<c10::ScalarType, DType> pairs[] = {
      {at::kFloat, DType::kFloat32}, {at::kDouble, DType::kFloat64}, {at::kHalf, DType::kFloat16},
      {at::kBFloat16, DType::kBFloat16}, {at::kChar, DType::kInt8}, {at::kByte, DType::kUInt8},
      {at::kInt, DType::kInt32}, {at::kLong, DType::kInt64}, {at::kBool, DType::kBool}};
  ASSERT_EQ(std::size(pairs), static_cast<size_t>(kNumDTypes));
  for (const auto& [torch_type, dtype] : pairs) {
    EXPECT_EQ(to_dtype(torch_type), dtype) << c10::toString(torch_type);
    EXPECT_EQ(to_scalar_type(dtype), torch_type) << dtype_name(dtype);
    at::Tensor t = at::zeros({2, 3}, at::TensorOptions().dtype(torch_type));
    Tensor view = as_tensor(t);
    EXPECT_EQ(view.dtype(), dtype);
    EXPECT_EQ(view.shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(view.nbytes(), t.nbytes()) << dtype_name(dtype);
    EXPECT_EQ(from_tensor(view).scalar_type(), torch_type);
  }
}

TEST(TensorBridge, DevicesMapBothWays) {
  EXPECT_EQ(to_device(c10::Device(c10::kCPU)), Device::cpu());
  EXPECT_EQ(to_device(c10::Device(c10::kCUDA, 3)), Device::cuda(3));
  EXPECT_EQ(to_torch_device(Device::cuda(2)), c10::Device(c10::kCUDA, 2));
  EXPECT_EQ(to_torch_device(Device::cpu()), c10::Device(c10::kCPU));
  EXPECT_THROW(to_device(c10::Device(c10::kMeta)), InvalidArgument);
}

TEST(TensorBridge, AWriteThroughEitherIsSeenThroughTheOther) {
  at::Tensor t = at::arange(6, at::kFloat).reshape({2, 3});
  Tensor view = as_tensor(t);
  EXPECT_EQ(view.data(), t.data_ptr());
  view.set_item(4, 40.0);
  EXPECT_EQ(t[1][1].item<float>(), 40.0f);
  t.mul_(2);
  EXPECT_EQ(view.item(5), 10.0);

  Tensor owned = Tensor::of<double>({1, 2, 3});
  at::Tensor back = from_tensor(owned);
  EXPECT_EQ(back.data_ptr(), owned.data());
  back.add_(1);
  EXPECT_EQ(owned.to_doubles(), (std::vector<double>{2, 3, 4}));
  owned.set_item(0, -1);
  EXPECT_EQ(back[0].item<double>(), -1.0);
}

TEST(TensorBridge, HalfPrecisionValuesSurviveTheTrip) {
  for (c10::ScalarType type : {at::kHalf, at::kBFloat16}) {
    at::Tensor t = at::tensor({0.5, -2.0, 1024.0}, at::kDouble).to(type);
    Tensor view = as_tensor(t);
    EXPECT_EQ(view.to_doubles(), (std::vector<double>{0.5, -2.0, 1024.0})) << c10::toString(type);
    view.set_item(1, 3.0);
    EXPECT_EQ(t[1].item<double>(), 3.0);
  }
}

TEST(TensorBridge, EachSideKeepsTheOthersMemoryAlive) {
  Tensor view;
  {
    at::Tensor t = at::full({1000}, 7.0f);
    view = as_tensor(t.slice(0, 10, 20));  // a contiguous slice: data_ptr is offset into storage
  }
  EXPECT_EQ(view.numel(), 10);
  EXPECT_EQ(view.item(9), 7.0);

  at::Tensor back;
  {
    Tensor owned = Tensor::of<int64_t>({5, 6});
    back = from_tensor(owned);
  }
  EXPECT_EQ(back[1].item<int64_t>(), 6);
}

TEST(TensorBridge, ScalarAndEmptyTensors) {
  at::Tensor scalar = at::scalar_tensor(2.5, at::kDouble);
  EXPECT_EQ(as_tensor(scalar).numel(), 1);
  EXPECT_EQ(as_tensor(scalar).item(), 2.5);
  EXPECT_EQ(from_tensor(as_tensor(scalar)).dim(), 0);
  EXPECT_EQ(as_tensor(at::empty({0, 4})).numel(), 0);
}

TEST(TensorBridge, RefusesWhatIsNotOneDenseBlock) {
  at::Tensor m = at::ones({3, 4});
  EXPECT_NE(message_of(m.t()).find("not contiguous; distcomm reads and writes one dense block: use t.contiguous()"),
            std::string::npos)
      << message_of(m.t());
  EXPECT_NE(message_of(m.to_sparse()).find("is not dense (layout Sparse); distcomm moves dense tensors: use t.to_dense()"),
            std::string::npos)
      << message_of(m.to_sparse());
  EXPECT_NE(message_of(m.neg().conj()).find("(no error)"), std::string::npos);  // real: conj is a no-op
  EXPECT_NE(message_of(at::_neg_view(m)).find("lazy negation"), std::string::npos) << message_of(at::_neg_view(m));
  EXPECT_NE(message_of(at::ones({2}, at::kComplexFloat)).find("torch dtype ComplexFloat has no distcomm dtype"),
            std::string::npos)
      << message_of(at::ones({2}, at::kComplexFloat));
  EXPECT_NE(message_of(at::ones({2}, at::kShort)).find("distcomm moves float32, float64, float16, bfloat16"),
            std::string::npos);
  EXPECT_NE(message_of(at::Tensor()).find("undefined"), std::string::npos);
}

}  // namespace
}  // namespace torch
}  // namespace distcomm
