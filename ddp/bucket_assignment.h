// Bucket assignment: which gradients share a flat buffer and one all_reduce.
//
// Gradients are packed in the order they are expected to become ready during backward
// (reverse parameter order at first, the observed order after the first iteration), one
// bucket stream per (dtype, device), because one all_reduce moves one dtype on one device.
// A bucket is closed as soon as it holds at least its cap, so it may exceed the cap by one
// gradient; the first bucket of each stream has a smaller cap, so that communication
// starts early in backward. Pure logic, no processes: see tests/ddp/bucket_assignment_test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "api/device.h"
#include "api/dtype.h"

namespace distcomm {
namespace ddp {

// What bucketing needs to know about one gradient.
struct GradientSpec {
  int64_t numel = 0;
  DType dtype = DType::kFloat32;
  Device device;
};

struct BucketSpec {
  DType dtype = DType::kFloat32;
  Device device;
  std::vector<size_t> gradients;  // indices into the GradientSpec list, in fill order
  std::vector<int64_t> offsets;   // element offset of each gradient in the flat buffer
  int64_t numel = 0;
  size_t nbytes() const { return static_cast<size_t>(numel) * element_size(dtype); }
  bool operator==(const BucketSpec& o) const {
    return dtype == o.dtype && device == o.device && gradients == o.gradients;
  }
};

struct BucketCaps {
  size_t first_bucket_bytes = 1u << 20;
  size_t bucket_bytes = 25u << 20;
};

// Converts a size in MiB (bucket_cap_mb) to bytes; throws InvalidArgument for a negative or
// non-finite value, naming `what`.
size_t mebibytes_to_bytes(double mebibytes, const char* what);

// n-1, n-2, ..., 0: the order gradients become ready in a backward pass over layers.
std::vector<size_t> reverse_order(size_t n);

// Packs gradients, taken in `order` (a permutation of 0..n-1), into buckets. The first
// bucket of each (dtype, device) stream is capped by min(first_bucket_bytes, bucket_bytes)
// (so a cap of 0 gives one bucket per gradient), later ones by bucket_bytes. Buckets are
// returned in the order they fill up when gradients arrive in `order`: the order in which
// they are launched. Throws InvalidArgument when order is not a permutation.
std::vector<BucketSpec> assign_buckets(const std::vector<GradientSpec>& gradients,
                                       const std::vector<size_t>& order, const BucketCaps& caps);

// "3 buckets: 1.00 MiB (2 grads), 24.80 MiB (5 grads), 512 B (1 grad)"
std::string describe_buckets(const std::vector<BucketSpec>& buckets);

}  // namespace ddp
}  // namespace distcomm
