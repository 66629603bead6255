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

// Buffers above kMaxFreeBytes ("large ones") are kept apart, the most recently returned
// kMaxLargeBuffers of them: without them a job's list op above 256 MiB allocated and faulted
// in a fresh buffer every call (2 ranks, all_gather of a list of 128 MiB + 128 B per rank:
// 2.0 s a call against 0.08 s at 128 MiB, helper-214). Two, since all_to_all of lists
// holds two at once (its packed input and output), as do two list ops in flight. A large
// one serves only a take of more than half its size, so a small op does not pin GiBs, and
// goes once kLargeIdleTakes takes in a row were served without it (the job's large op was
// a one-off) or when newer large ones replace it.
constexpr size_t kMaxLargeBuffers = 2;
constexpr int kLargeIdleTakes = 8;

class ScratchPool {
 public:
  Tensor take(int64_t numel, DType dtype) {
    const size_t bytes = static_cast<size_t>(numel) * element_size(dtype);
    Tensor buffer;
    std::vector<Tensor> dropped;  // freed once the lock is released: unmapping GiBs takes a while
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++taken_;
      // The smallest that fits: the others stay for larger ops.
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->nbytes() >= bytes && (best == free_.end() || it->nbytes() < best->nbytes())) best = it;
      }
      auto best_large = large_.end();
      for (auto it = large_.begin(); it != large_.end(); ++it) {
        const size_t have = it->buffer.nbytes();
        const bool serves = have >= bytes && bytes > have / 2;
        if (serves && (best_large == large_.end() || have < best_large->buffer.nbytes())) best_large = it;
      }
      // A kept small one fits more tightly than any large one (all above kMaxFreeBytes).
      if (best != free_.end()) {
        buffer = std::move(*best);
        free_bytes_ -= buffer.nbytes();
        free_.erase(best);
      } else if (best_large != large_.end()) {
        buffer = std::move(best_large->buffer);
        large_bytes_ -= buffer.nbytes();
        large_.erase(best_large);
      }
      // The large ones this take passed by: one more take without them.
      for (auto it = large_.begin(); it != large_.end();) {
        if (++it->passed_by < kLargeIdleTakes) {
          ++it;
          continue;
        }
        large_bytes_ -= it->buffer.nbytes();
        dropped.push_back(std::move(it->buffer));
        it = large_.erase(it);
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
    ScratchPoolUse u;
    u.free_buffers = free_.size();
    u.free_bytes = free_bytes_;
    u.taken = taken_;
    u.allocated = allocated_;
    u.large_buffers = large_.size();
    u.large_bytes = large_bytes_;
    return u;
  }

 private:
  struct Large {
    Tensor buffer;
    int passed_by = 0;  // takes in a row served without it since it came back
  };

  void give_back(Tensor buffer) {
    std::vector<Tensor> dropped;  // freed once the lock is released
    std::lock_guard<std::mutex> lock(mu_);
    if (buffer.nbytes() > kMaxFreeBytes) {
      large_bytes_ += buffer.nbytes();
      large_.push_back(Large{std::move(buffer), 0});
      if (large_.size() > kMaxLargeBuffers) {
        // The one passed by most goes; of equals the one returned first (nearer the front).
        auto stale = std::max_element(large_.begin(), large_.end(),
                                      [](const Large& a, const Large& b) { return a.passed_by < b.passed_by; });
        large_bytes_ -= stale->buffer.nbytes();
        dropped.push_back(std::move(stale->buffer));
        large_.erase(stale);
      }
      return;
    }
    free_bytes_ += buffer.nbytes();
    free_.push_back(std::move(buffer));
    // Over the limits: the smallest go first (a large buffer serves small ops too).
    while (free_.size() > kMaxFreeBuffers || free_bytes_ > kMaxFreeBytes) {
      auto smallest = std::min_element(free_.begin(), free_.end(),
                                       [](const Tensor& a, const Tensor& b) { return a.nbytes() < b.nbytes(); });
      free_bytes_ -= smallest->nbytes();
      dropped.push_back(std::move(*smallest));
      free_.erase(smallest);
    }
  }

  mutable std::mutex mu_;
  std::vector<Tensor> free_;  // up to kMaxFreeBuffers, kMaxFreeBytes in all
  size_t free_bytes_ = 0;
  std::vector<Large> large_;  // up to kMaxLargeBuffers, each above kMaxFreeBytes, oldest first
  size_t large_bytes_ = 0;
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
