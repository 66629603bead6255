// A Store that forwards every call to another. Tests derive from it and override only what
// they change: a store that hangs at a key, kills its rank, is cut off, or keeps some keys.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "api/store/store.h"

namespace distcomm {
namespace testing {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(StorePtr inner) : inner_(std::move(inner)) {}

  using Store::set;
  void set(const std::string& key, const Bytes& value) override { inner_->set(key, value); }
  Bytes get(const std::string& key) override { return inner_->get(key); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(key, delta); }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return inner_->compare_set(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    inner_->wait(keys, timeout);
  }
  bool delete_key(const std::string& key) override { return inner_->delete_key(key); }
  int64_t num_keys() override { return inner_->num_keys(); }

 protected:
  Store& inner() const { return *inner_; }

 private:
  const StorePtr inner_;
};

}  // namespace testing
}  // namespace distcomm
