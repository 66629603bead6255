#include "api/store/server/charged_buffer.h"

#include <algorithm>
#include <cstring>

namespace distcomm {
namespace internal {

namespace {

// The smallest buffer a connection gets once it sends or is sent anything.
constexpr size_t kFirstCapacity = 256;
// An emptied buffer keeps up to this much for the next request; more is given back, so
// that a thousand idle connections hold a few KiB each.
constexpr size_t kKeepCapacity = size_t{4} << 10;

}  // namespace

bool BufferPool::take(size_t n) {
  if (n > capacity_ - used_) return false;
  used_ += n;
  return true;
}

void BufferPool::give(size_t n) {
  used_ -= std::min(n, used_);
  ++releases_;
}

ChargedBuffer::~ChargedBuffer() {
  if (charged_ > 0) pool_->give(charged_);
}

void ChargedBuffer::append(const uint8_t* data, size_t n) {
  bytes_.insert(bytes_.end(), data, data + n);
}

bool ChargedBuffer::reserve(size_t n) {
  if (n <= bytes_.capacity()) return true;
  const size_t target =
      n > free_ ? n : std::max(n, std::min(free_, std::max(kFirstCapacity, 2 * bytes_.capacity())));
  const size_t charge = target > free_ ? target - free_ : 0;
  if (charge > charged_ && !pool_->take(charge - charged_)) return false;
  set_capacity(target);
  return true;
}

void ChargedBuffer::consume(size_t n) {
  n = std::min(n, bytes_.size());
  bytes_.erase(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(n));
  if (bytes_.empty() ? bytes_.capacity() > kKeepCapacity : charged_ > 0 && bytes_.size() <= free_) {
    set_capacity(bytes_.size());
  }
}

void ChargedBuffer::set_capacity(size_t n) {
  // std::vector::reserve allocates exactly n; shrinking takes a fresh vector.
  Store::Bytes fresh;
  fresh.reserve(n);
  fresh.assign(bytes_.begin(), bytes_.end());
  bytes_.swap(fresh);
  const size_t charge = n > free_ ? n - free_ : 0;
  if (charge < charged_) pool_->give(charged_ - charge);
  charged_ = charge;
}

}  // namespace internal
}  // namespace distcomm
