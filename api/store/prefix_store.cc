#include "api/store/prefix_store.h"

#include <utility>

#include "api/errors.h"

namespace distcomm {

PrefixStore::PrefixStore(std::string prefix, StorePtr base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {
  if (!base_) throw InvalidArgument("PrefixStore '" + prefix_ + "': the base store is null");
  timeout_ = base_->timeout();
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  base_->set(prefixed(key), value);
}

Store::Bytes PrefixStore::get(const std::string& key) {
  // base_->get() would wait with the base store's timeout, not ours.
  const std::string k = prefixed(key);
  base_->wait({k}, timeout_);
  return base_->get(k);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return base_->add(prefixed(key), delta);
}

Store::Bytes PrefixStore::compare_set(const std::string& key, const Bytes& expected,
                                      const Bytes& desired) {
  return base_->compare_set(prefixed(key), expected, desired);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  return base_->check(prefixed(keys));
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  base_->wait(prefixed(keys), resolve(timeout));
}

bool PrefixStore::delete_key(const std::string& key) { return base_->delete_key(prefixed(key)); }

int64_t PrefixStore::num_keys() { return base_->num_keys(); }

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefixed(k));
  return out;
}

}  // namespace distcomm
