// A test-only plugin as built against ABI 1.0: its descriptor ends before config_keys
// (written out by hand, as that build's DISTCOMM_DEFINE_PLUGIN wrote it). The loader must
// take it, and leave its group's config unchecked.
#include <cstdint>
#include <string>

#include "api/errors.h"
#include "api/plugin/plugin.h"

namespace {

class Abi10Backend : public distcomm::Backend {
 public:
  using Backend::Backend;
  std::string name() const override { return "abi_1_0"; }
  std::vector<distcomm::OpType> supported_ops() const override { return {}; }
  // Built from today's headers, this class has the slots of later minors; a real 1.0
  // plugin has none, so the core must not call them (it reads the minor, 0).
  void abort() override { throw distcomm::Error("abi_1_0: the core called Backend::abort (ABI 1.4)"); }
  distcomm::Backend* create_subgroup_backend(const distcomm::BackendOptions*, const std::vector<int>&) override {
    throw distcomm::Error("abi_1_0: the core called Backend::create_subgroup_backend (ABI 1.4)");
  }
  std::vector<distcomm::OpType> list_ops() const override {
    throw distcomm::Error("abi_1_0: the core called Backend::list_ops (ABI 1.6)");
  }
};

int available(std::string*) { return 1; }
distcomm::Backend* create(const distcomm::BackendOptions& o) { return new Abi10Backend(o); }

struct DescriptorV10 {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* toolchain;
  const char* name;
  const char* version;
  uint32_t devices;
  uint32_t flags;
  int (*available)(std::string* why);
  distcomm::Backend* (*create)(const distcomm::BackendOptions& options);
};
static_assert(sizeof(DescriptorV10) == DISTCOMM_PLUGIN_V1_0_SIZE, "ABI 1.0's descriptor is a prefix of today's");

}  // namespace

extern "C" __attribute__((visibility("default"))) const distcomm_plugin_v1* distcomm_backend_plugin_v1() {
  static const DescriptorV10 d = {sizeof(DescriptorV10), 1, 0, DISTCOMM_TOOLCHAIN_TAG, "abi_1_0", "abi_1_0 test plugin",
                                  DISTCOMM_DEVICE_CPU, 0, available, create};
  return reinterpret_cast<const distcomm_plugin_v1*>(&d);
}
