// Objects that are costly to make, kept for reuse: the CUDA events that mark where ops end
// (cudaEventCreate and cudaEventDestroy take the driver's locks, once per op otherwise).
// No CUDA here: how to make and destroy one is given, so the pool is tested on any machine.
#pragma once

#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace distcomm {
namespace nccl {

template <typename T>
class ObjectPool {
 public:
  // make() throws when it cannot make one; destroy() must not throw. At most keep_at_most
  // objects are kept; more given back are destroyed.
  ObjectPool(std::function<T()> make, std::function<void(T)> destroy, size_t keep_at_most)
      : make_(std::move(make)), destroy_(std::move(destroy)), keep_at_most_(keep_at_most) {}
  ~ObjectPool() {
    for (T& t : kept_) destroy_(t);
  }
  ObjectPool(const ObjectPool&) = delete;
  ObjectPool& operator=(const ObjectPool&) = delete;

  // A kept object, or a new one.
  T take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!kept_.empty()) {
        T t = std::move(kept_.back());
        kept_.pop_back();
        return t;
      }
    }
    return make_();
  }

  // Back for the next take(), or destroyed if enough are kept.
  void give_back(T t) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (kept_.size() < keep_at_most_) {
        kept_.push_back(std::move(t));
        return;
      }
    }
    destroy_(t);
  }

  size_t kept() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_.size();
  }

 private:
  const std::function<T()> make_;
  const std::function<void(T)> destroy_;
  const size_t keep_at_most_;
  mutable std::mutex mu_;
  std::vector<T> kept_;
};

}  // namespace nccl
}  // namespace distcomm
