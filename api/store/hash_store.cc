#include "api/store/hash_store.h"

#include "api/store/internal/key_value_map.h"

namespace distcomm {

HashStore::HashStore() : map_(std::make_unique<internal::KeyValueMap>()) {}

HashStore::~HashStore() = default;

void HashStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  map_->set(key, value);
  changed_.notify_all();
}

Store::Bytes HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, {key}, timeout_);
  return *map_->find(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t v = map_->add(key, delta);
  changed_.notify_all();
  return v;
}

Store::Bytes HashStore::compare_set(const std::string& key, const Bytes& expected,
                                    const Bytes& desired) {
  std::lock_guard<std::mutex> lock(mu_);
  Bytes v = map_->compare_set(key, expected, desired);
  changed_.notify_all();
  return v;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return map_->missing(keys).empty();
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, keys, resolve(timeout));
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return map_->erase(key);
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return map_->size();
}

void HashStore::wait_locked(std::unique_lock<std::mutex>& lock,
                            const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto all_set = [&] { return map_->missing(keys).empty(); };
  if (!changed_.wait_until(lock, deadline, all_set)) {
    throw internal::wait_timeout("HashStore", map_->missing(keys), timeout);
  }
}

}  // namespace distcomm
