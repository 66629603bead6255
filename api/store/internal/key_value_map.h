// The key-value semantics every Store shares, so that HashStore, FileStore and the
// TCPStore server cannot drift apart on what add() or compare_set() mean.
// Not thread-safe: each owner guards it with its own lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/errors.h"
#include "api/store/store.h"

namespace distcomm {
namespace internal {

class KeyValueMap {
 public:
  using Bytes = Store::Bytes;

  // Returns true when the key did not exist before.
  bool set(const std::string& key, Bytes value);
  // Null when absent. Valid until the next change to the map.
  const Bytes* find(const std::string& key) const;
  bool contains(const std::string& key) const { return map_.count(key) != 0; }
  bool erase(const std::string& key) { return map_.erase(key) != 0; }
  int64_t size() const { return static_cast<int64_t>(map_.size()); }

  // Store::add and Store::compare_set; `created` says whether the key is new, which is
  // what wakes waiters.
  int64_t add(const std::string& key, int64_t delta, bool* created = nullptr);
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired,
                    bool* created = nullptr);

  std::vector<std::string> missing(const std::vector<std::string>& keys) const;

 private:
  std::unordered_map<std::string, Bytes> map_;
};

// The value add() stores: the decimal integer in `current` (0 when absent) plus delta.
// Throws StoreError when the value is not an integer or the sum overflows.
int64_t added_value(const std::string& key, const Store::Bytes* current, int64_t delta);
Store::Bytes encode_integer(int64_t v);

// compare_set swaps when the value equals expected, or the key is absent and expected
// is empty (so that an empty expected value means "create if absent").
bool compare_set_matches(const Store::Bytes* current, const Store::Bytes& expected);

// "250 ms", "30 s", "1.5 s": how error messages state durations.
std::string format_duration(std::chrono::milliseconds d);

// The Timeout a store throws when keys are still missing at the deadline.
Timeout wait_timeout(const std::string& store, const std::vector<std::string>& missing,
                     std::chrono::milliseconds timeout);

}  // namespace internal
}  // namespace distcomm
