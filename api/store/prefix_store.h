// PrefixStore: a namespace inside another store, so that groups sharing one store do not
// see each other's keys (c10d's PrefixStore). Every key becomes prefix + "/" + key.
#pragma once

#include "api/store/store.h"

namespace distcomm {

class PrefixStore : public Store {
 public:
  // Starts with base's timeout; set_timeout() on this store then applies to its get()
  // and wait() only.
  PrefixStore(std::string prefix, StorePtr base);

  using Store::set;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout = kUseDefault) override;
  bool delete_key(const std::string& key) override;
  // The base store's count: keys of every prefix, since stores cannot count by prefix.
  int64_t num_keys() override;

  const std::string& prefix() const { return prefix_; }
  const StorePtr& base() const { return base_; }
  // The keys as the base store holds them.
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

 private:
  std::string prefixed(const std::string& key) const { return prefix_ + "/" + key; }

  std::string prefix_;
  StorePtr base_;
};

}  // namespace distcomm
