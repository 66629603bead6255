// EXAMPLE CODE: deterministic synthetic data sets, the same on every rank and machine, so
// each rank can take its own slice of a global batch without any file or download.
#pragma once

#include <cstdint>
#include <vector>

#include "api/tensor.h"

namespace nn {

struct Dataset {
  distcomm::Tensor inputs;       // [size, features]
  distcomm::Tensor targets;      // [size, outputs] (regression; undefined for classification)
  std::vector<int64_t> labels;   // classification; empty for regression
  int64_t size() const { return inputs.defined() ? inputs.shape()[0] : 0; }
};

// Gaussian-like blobs: `classes` random centres, points scattered around them.
Dataset make_blobs(int64_t size, int64_t features, int64_t classes, uint64_t seed);

// Targets from a fixed random "teacher" function (a sine of random projections).
Dataset make_regression(int64_t size, int64_t features, int64_t outputs, uint64_t seed);

// Rows [begin, begin + count) as views (no copy).
distcomm::Tensor rows(const distcomm::Tensor& t, int64_t begin, int64_t count);
std::vector<int64_t> rows(const std::vector<int64_t>& labels, int64_t begin, int64_t count);

}  // namespace nn
