#include "api/ops/scratch_pool.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

namespace distcomm {
namespace {

// At most this many unused buffers, and bytes, are kept: a job's list ops reuse a few
// sizes, and a buffer of one large op must not stay for the rest of the job.
constexpr size_t kMaxFreeBuffers = 4;
constexpr size_t kMaxFreeBytes = size_t{256} << 20;

class ScratchPool {
 public:
  Tensor take(int64_t numel, DType dtype) {
    const size_t bytes = static_cast<size_t>(numel) * element_size(dtype);
    Tensor buffer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++taken_;
      // The smallest that fits: the others stay for larger ops.
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->nbytes() >= bytes && (best == free_.end() || it->nbytes() < best->nbytes())) best = it;
      }
      if (best != free_.end()) {
        buffer = std::move(*best);
        free_bytes_ -= buffer.nbytes();
        free_.erase(best);
      }
    }
    if (!buffer.defined()) {
      buffer = Tensor::empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::kUInt8);
      std::lock_guard<std::mutex> lock(mu_);
      ++allocated_;
    }
    void* data = buffer.data();
    // The view's owner returns the buffer when the last copy of the view goes. The pool
    // is never destroyed (an op may end while the process exits), so the pointer holds.
    auto held = std::shared_ptr<Tensor>(new Tensor(std::move(buffer)), [this](Tensor* t) {
      give_back(std::move(*t));
      delete t;
    });
    return Tensor::from_blob(data, {numel}, dtype, Device::cpu(), std::shared_ptr<void>(held, held->data()));
  }

  ScratchPoolUse use() const {
    std::lock_guard<std::mutex> lock(mu_);
    return {free_.size(), free_bytes_, taken_, allocated_};
  }

 private:
  void give_back(Tensor buffer) {
    std::lock_guard<std::mutex> lock(mu_);
    if (buffer.nbytes() > kMaxFreeBytes) return;  // freed when `buffer` goes
    free_bytes_ += buffer.nbytes();
    free_.push_back(std::move(buffer));
    // Over the limits: the smallest go first (a large buffer serves small ops too).
    while (free_.size() > kMaxFreeBuffers || free_bytes_ > kMaxFreeBytes) {
      auto smallest = std::min_element(free_.begin(), free_.end(),
                                       [](const Tensor& a, const Tensor& b) { return a.nbytes() < b.nbytes(); });
      free_bytes_ -= smallest->nbytes();
      free_.erase(smallest);
    }
  }

  mutable std::mutex mu_;
  std::vector<Tensor> free_;
  size_t free_bytes_ = 0;
  uint64_t taken_ = 0;
  uint64_t allocated_ = 0;
};

ScratchPool& pool() {
  static auto* p = new ScratchPool;  // never destroyed: see take()
  return *p;
}

}  // namespace

Tensor pooled_tensor(int64_t numel, DType dtype) { return pool().take(numel, dtype); }

ScratchPoolUse scratch_pool_use() { return pool().use(); }

}  // namespace distcomm
