#include "ddp/bucket_assignment.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "api/errors.h"
#include "ddp/message_format.h"

namespace distcomm {
namespace ddp {

size_t mebibytes_to_bytes(double mebibytes, const char* what) {
  if (!std::isfinite(mebibytes) || mebibytes < 0) {
    throw InvalidArgument(std::string(what) + " must be a finite size in MiB >= 0, got " +
                          std::to_string(mebibytes));
  }
  return static_cast<size_t>(std::llround(mebibytes * 1024.0 * 1024.0));
}

std::vector<size_t> reverse_order(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  return order;
}

namespace {

void check_permutation(const std::vector<size_t>& order, size_t n) {
  if (order.size() != n) {
    throw InvalidArgument("bucket order lists " + std::to_string(order.size()) + " gradients, expected " +
                          std::to_string(n));
  }
  std::vector<bool> seen(n, false);
  for (size_t index : order) {
    if (index >= n || seen[index]) {
      throw InvalidArgument("bucket order is not a permutation of 0.." + std::to_string(n - 1) +
                            ": index " + std::to_string(index) + (index >= n ? " is out of range" : " repeats"));
    }
    seen[index] = true;
  }
}

// Buckets of one (dtype, device) are filled one at a time; this is the open one.
struct Stream {
  BucketSpec open;
  size_t closed = 0;    // buckets this stream has closed: the first one gets the small cap
  size_t last_pos = 0;  // position in the order of the open bucket's last gradient
};

}  // namespace

std::vector<BucketSpec> assign_buckets(const std::vector<GradientSpec>& gradients,
                                       const std::vector<size_t>& order, const BucketCaps& caps) {
  check_permutation(order, gradients.size());
  const size_t first_cap = std::min(caps.first_bucket_bytes, caps.bucket_bytes);
  // Each bucket with the position in `order` of its last gradient: when it becomes full.
  std::vector<std::pair<size_t, BucketSpec>> done;
  std::map<std::pair<int, std::pair<int, int>>, Stream> streams;
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const GradientSpec& g = gradients[order[pos]];
    const auto key = std::make_pair(static_cast<int>(g.dtype),
                                    std::make_pair(static_cast<int>(g.device.type), g.device.index));
    Stream& s = streams[key];
    s.open.dtype = g.dtype;
    s.open.device = g.device;
    s.open.gradients.push_back(order[pos]);
    s.open.offsets.push_back(s.open.numel);
    s.open.numel += g.numel;
    s.last_pos = pos;
    const size_t cap = s.closed == 0 ? first_cap : caps.bucket_bytes;
    if (s.open.nbytes() >= cap) {
      done.emplace_back(pos, std::move(s.open));
      s.open = BucketSpec();
      ++s.closed;
    }
  }
  for (auto& entry : streams) {
    Stream& s = entry.second;
    if (!s.open.gradients.empty()) done.emplace_back(s.last_pos, std::move(s.open));
  }
  std::sort(done.begin(), done.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<BucketSpec> buckets;
  buckets.reserve(done.size());
  for (auto& entry : done) buckets.push_back(std::move(entry.second));
  return buckets;
}

std::string describe_buckets(const std::vector<BucketSpec>& buckets) {
  std::string s = std::to_string(buckets.size()) + (buckets.size() == 1 ? " bucket" : " buckets");
  for (size_t i = 0; i < buckets.size(); ++i) {
    const size_t n = buckets[i].gradients.size();
    s += (i ? ", " : ": ") + format_bytes(static_cast<double>(buckets[i].nbytes())) + " (" +
         std::to_string(n) + (n == 1 ? " grad)" : " grads)");
  }
  return s;
}

}  // namespace ddp
}  // namespace distcomm
