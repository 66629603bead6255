// A test-only plugin that accepts groups of any size and implements no op: for testing
// what the core does with a group's store alone (ordered logging, split, init).
#include "api/plugin.h"

namespace {

class AnySizeBackend : public distcomm::Backend {
 public:
  using Backend::Backend;
  std::string name() const override { return "any_size"; }
  std::vector<distcomm::OpType> supported_ops() const override { return {}; }
};

int available(std::string*) { return 1; }
distcomm::Backend* create(const distcomm::BackendOptions& o) { return new AnySizeBackend(o); }

}  // namespace

DISTCOMM_DEFINE_PLUGIN("any_size", "any_size test plugin", DISTCOMM_DEVICE_CPU, 0, available, create)
