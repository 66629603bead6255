#include "backends/gloo/gloo_store_adapter.h"

namespace distcomm {
namespace gloo {

// distcomm's errors (Timeout naming the missing keys, StoreError) pass through gloo's
// rendezvous unchanged, so a rank that never arrives is reported by the store's own message.

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_->set(key, distcomm::Store::Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  const distcomm::Store::Bytes value = store_->get(key);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  store_->wait(keys);
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  store_->wait(keys, timeout);
}

}  // namespace gloo
}  // namespace distcomm
