// HashStore: a Store inside one process, for tests and single-process groups.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>

#include "api/store/store.h"

namespace distcomm {

namespace internal {
class KeyValueMap;
}

class HashStore : public Store {
 public:
  HashStore();
  ~HashStore() override;

  using Store::set;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout = kUseDefault) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

 private:
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   std::chrono::milliseconds timeout);

  std::mutex mu_;
  std::condition_variable changed_;
  std::unique_ptr<internal::KeyValueMap> map_;
};

}  // namespace distcomm
