// gloo's rendezvous talks to a gloo::rendezvous::Store; this one forwards to the group's
// distcomm Store, so a gloo group needs no second store and inherits the group's prefix
// (BackendOptions.store is already private to this group and backend).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "api/store.h"

namespace distcomm {
namespace gloo {

class GlooStoreAdapter : public ::gloo::rendezvous::Store {
 public:
  explicit GlooStoreAdapter(StorePtr store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  StorePtr store_;
};

}  // namespace gloo
}  // namespace distcomm
