#include "ddp/broadcast_coalesced.h"

#include "ddp/bucket_assignment.h"

namespace distcomm {
namespace ddp {

void broadcast_coalesced(ProcessGroup& pg, const std::vector<Tensor*>& tensors, int root, size_t cap_bytes) {
  if (pg.size() == 1 || tensors.empty()) return;
  std::vector<GradientSpec> specs;
  std::vector<size_t> order;
  for (const Tensor* t : tensors) {
    order.push_back(specs.size());
    specs.push_back({t->numel(), t->dtype(), t->device()});
  }
  BroadcastOptions opts;
  opts.root = root;
  for (const BucketSpec& bucket : assign_buckets(specs, order, {cap_bytes, cap_bytes})) {
    if (bucket.gradients.size() == 1) {
      pg.broadcast(*tensors[bucket.gradients[0]], opts)->wait();
      continue;
    }
    Tensor flat = Tensor::empty({bucket.numel}, bucket.dtype);
    auto slice = [&](size_t k) {
      const Tensor& t = *tensors[bucket.gradients[k]];
      return flat.flat_slice(bucket.offsets[k], t.numel());
    };
    if (pg.rank() == root) {
      for (size_t k = 0; k < bucket.gradients.size(); ++k) slice(k).copy_from(*tensors[bucket.gradients[k]]);
    }
    pg.broadcast(flat, opts)->wait();
    if (pg.rank() != root) {
      for (size_t k = 0; k < bucket.gradients.size(); ++k) tensors[bucket.gradients[k]]->copy_from(slice(k));
    }
  }
}

}  // namespace ddp
}  // namespace distcomm
