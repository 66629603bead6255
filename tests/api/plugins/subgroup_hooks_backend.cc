// A test-only plugin that logs the ABI 1.4 calls it gets (Backend::abort, shutdown,
// create_subgroup_backend) in its group's store, under "log/<rank>", so that a test sees
// which the core made, on which rank and in what order. It derives a subgroup's backend
// from its own for subgroups of two or more ranks and leaves single-rank ones to create().
#include <string>
#include <vector>

#include "api/plugin/plugin.h"

namespace {

class SubgroupHooksBackend : public distcomm::Backend {
 public:
  SubgroupHooksBackend(const distcomm::BackendOptions& o, const std::string& how) : Backend(o) { log(how); }
  std::string name() const override { return "subgroup_hooks"; }
  std::vector<distcomm::OpType> supported_ops() const override { return {}; }

  void shutdown() override {
    if (!ended_) log("shutdown");
    ended_ = true;
  }
  void abort() override {
    if (!ended_) log("abort");
    ended_ = true;
  }
  distcomm::Backend* create_subgroup_backend(const distcomm::BackendOptions* options,
                                             const std::vector<int>& members) override {
    std::string list;
    for (int m : members) list += (list.empty() ? "" : ",") + std::to_string(m);
    log((options ? "member of [" : "left out of [") + list + "]");
    if (!options || members.size() < 2) return nullptr;
    return new SubgroupHooksBackend(*options, "derived");
  }

 private:
  void log(const std::string& what) {
    const std::string key = "log/" + std::to_string(rank());
    auto& store = *options().store;
    const std::string before = store.check({key}) ? distcomm::to_string(store.get(key)) : "";
    store.set(key, distcomm::to_bytes(before + (before.empty() ? "" : "; ") + what));
  }
  bool ended_ = false;
};

int available(std::string*) { return 1; }
distcomm::Backend* create(const distcomm::BackendOptions& o) { return new SubgroupHooksBackend(o, "created"); }

}  // namespace

DISTCOMM_DEFINE_PLUGIN("subgroup_hooks", "subgroup_hooks test plugin", DISTCOMM_DEVICE_CPU, 0, available, create)
