// A value the core keeps beside a backend's Work, keyed by its address: a Work's layout is
// the plugins' ABI (plugin.h), so it cannot grow a field for what only the core's stall
// watch needs. Entries are rare (most programs never write one), so a read costs one
// atomic load while the table is empty. An entry is forgotten when its Work ends (the
// writer registers Work::on_finish) and again when the Work is destroyed (~Work: a Work
// freed without ending must not leave its entry to a later Work at the same address).
//
// Core only (not in PUBLIC_HEADERS).
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace distcomm {

class Work;

template <typename Value>
class WorkSideTable {
 public:
  // Records `value` for `work`; false (and nothing changes) where one is recorded already.
  bool note(const Work* work, Value value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!by_work_.emplace(work, value).second) return false;
    count_.fetch_add(1, std::memory_order_release);
    return true;
  }

  // Records `value` for `work`, replacing the one recorded; true where none was (the
  // caller then arranges for it to be forgotten), false where it replaced one.
  bool put(const Work* work, Value value) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = by_work_.emplace(work, value);
    if (!added) {
      it->second = std::move(value);
      return false;
    }
    count_.fetch_add(1, std::memory_order_release);
    return true;
  }

  // The value recorded for `work`, Value{} where none.
  Value of(const Work* work) const {
    if (work == nullptr || count_.load(std::memory_order_acquire) == 0) return Value{};
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = by_work_.find(work);
    return it == by_work_.end() ? Value{} : it->second;
  }

  void forget(const Work* work) {
    if (count_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (by_work_.erase(work) != 0) count_.fetch_sub(1, std::memory_order_release);
  }

 private:
  mutable std::mutex mu_;  // a leaf: nothing else is locked under it
  std::unordered_map<const Work*, Value> by_work_;
  std::atomic<size_t> count_{0};
};

}  // namespace distcomm
