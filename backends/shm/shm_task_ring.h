// A FIFO of the engine's queued ops: a ring over one buffer that doubles when full and never
// shrinks, so that queueing an op allocates nothing once the ring has grown to the group's
// usual depth (std::deque allocated a node every few ops, a malloc/free pair each).
// Items are only ever move-constructed into place and destroyed there, never assigned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

namespace distcomm {
namespace shm {

template <typename T>
class TaskRing {
  static_assert(std::is_nothrow_move_constructible<T>::value, "growing moves the items");

 public:
  TaskRing() = default;
  ~TaskRing() {
    clear();
    ::operator delete(items_, std::align_val_t(alignof(T)));
  }
  TaskRing(const TaskRing&) = delete;
  TaskRing& operator=(const TaskRing&) = delete;

  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  // The i-th item from the front.
  T& operator[](size_t i) { return items_[(head_ + i) & (capacity_ - 1)]; }
  const T& operator[](size_t i) const { return items_[(head_ + i) & (capacity_ - 1)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  // How many items have ever left the front (pop_front, clear): an item pushed when the ring
  // held n is still in it, at n - (pops() - pops() then), while that is not negative.
  uint64_t pops() const { return pops_; }

  void push_back(T&& item) {
    if (count_ == capacity_) grow();
    new (&items_[(head_ + count_) & (capacity_ - 1)]) T(std::move(item));
    ++count_;
  }
  void pop_front() {
    items_[head_].~T();
    head_ = (head_ + 1) & (capacity_ - 1);
    --count_;
    ++pops_;
  }
  void clear() {
    while (count_ > 0) pop_front();
    head_ = 0;
  }

 private:
  void grow() {
    const size_t capacity = capacity_ == 0 ? 8 : 2 * capacity_;  // a power of two
    T* items = static_cast<T*>(::operator new(capacity * sizeof(T), std::align_val_t(alignof(T))));
    for (size_t i = 0; i < count_; ++i) {
      T& from = (*this)[i];
      new (&items[i]) T(std::move(from));
      from.~T();
    }
    ::operator delete(items_, std::align_val_t(alignof(T)));
    items_ = items;
    capacity_ = capacity;
    head_ = 0;
  }

  T* items_ = nullptr;
  size_t capacity_ = 0;  // 0 or a power of two
  size_t head_ = 0;
  size_t count_ = 0;
  uint64_t pops_ = 0;
};

}  // namespace shm
}  // namespace distcomm
