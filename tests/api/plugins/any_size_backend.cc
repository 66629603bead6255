// A test-only plugin that accepts groups of any size and lists no op: for testing what the
// core does with a group's store alone (ordered logging, split, init), and that the core
// never calls an op's virtual the backend does not list (as a plugin built before the op
// was added would not have it: api/plugin/plugin.h).
#include "api/errors.h"
#include "api/plugin/plugin.h"

namespace {

class AnySizeBackend : public distcomm::Backend {
 public:
  using Backend::Backend;
  std::string name() const override { return "any_size"; }
  std::vector<distcomm::OpType> supported_ops() const override { return {}; }
  distcomm::WorkPtr barrier(const distcomm::BarrierOptions&, const distcomm::OpContext&) override {
    throw distcomm::Error("any_size: the core called barrier(), which this backend does not list");
  }
  distcomm::WorkPtr all_reduce(distcomm::Tensor&, const distcomm::AllReduceOptions&,
                               const distcomm::OpContext&) override {
    throw distcomm::Error("any_size: the core called all_reduce(), which this backend does not list");
  }
};

int available(std::string*) { return 1; }
distcomm::Backend* create(const distcomm::BackendOptions& o) { return new AnySizeBackend(o); }

}  // namespace

DISTCOMM_DEFINE_PLUGIN("any_size", "any_size test plugin", DISTCOMM_DEVICE_CPU, 0, available, create)
