// Float32 tensors for the shm tests: one filled with a value, and a check that every
// element holds one (naming the first that does not).
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "api/tensor.h"

namespace distcomm {
namespace testing {

inline Tensor filled(int64_t n, float value) {
  Tensor t = Tensor::empty({n});
  t.fill(value);
  return t;
}

inline void expect_all(const Tensor& t, double value, const std::string& what) {
  const float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != value) {
      ADD_FAILURE() << what << ": element " << i << " is " << p[i] << ", expected " << value;
      return;
    }
  }
}

}  // namespace testing
}  // namespace distcomm
