// Memory the TCPStore server buffers for its clients, counted against one budget.
//
// Every connection may buffer a small allowance for free (enough for any rendezvous
// message), so that the job's own small requests never wait for memory. Beyond it, a
// buffer's capacity is charged to a pool shared by all connections; when the pool is
// spent, a connection that needs more waits (the server stops reading it) until others
// give memory back. Capacities change only through these classes, and grow exactly to
// what is asked (never the doubling of std::vector), so the pool counts what is held.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/store/store.h"

namespace distcomm {
namespace internal {

class BufferPool {
 public:
  explicit BufferPool(size_t capacity) : capacity_(capacity) {}
  bool take(size_t n);
  void give(size_t n);
  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  // Counts give() calls: a waiter that saw the pool full retries once this has moved.
  uint64_t releases() const { return releases_; }

 private:
  size_t capacity_;
  size_t used_ = 0;
  uint64_t releases_ = 0;
};

class ChargedBuffer {
 public:
  ChargedBuffer(BufferPool* pool, size_t free_bytes) : pool_(pool), free_(free_bytes) {}
  ~ChargedBuffer();
  ChargedBuffer(const ChargedBuffer&) = delete;
  ChargedBuffer& operator=(const ChargedBuffer&) = delete;

  Store::Bytes& bytes() { return bytes_; }
  const Store::Bytes& bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }
  size_t capacity() const { return bytes_.capacity(); }
  // Appends without reallocating: the caller made room with reserve().
  void append(const uint8_t* data, size_t n);

  // Makes the capacity at least n. Within the free allowance it grows geometrically; past
  // it, to exactly n. False, and nothing changes, when the pool has not the room.
  bool reserve(size_t n);
  // Drops the first n bytes, and gives back what the capacity holds beyond the free
  // allowance once the rest fits in it (all but a little once it is empty).
  void consume(size_t n);

 private:
  void set_capacity(size_t n);

  BufferPool* pool_;
  size_t free_;
  size_t charged_ = 0;
  Store::Bytes bytes_;
};

}  // namespace internal
}  // namespace distcomm
