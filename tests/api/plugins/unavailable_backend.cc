// A test-only plugin whose available() probe says no, the way nccl does without a GPU.
#include "api/plugin.h"

namespace {
int available(std::string* why) {
  *why = "no test device: the probe is hard-wired to say no";
  return 0;
}
distcomm::Backend* create(const distcomm::BackendOptions&) { return nullptr; }
}  // namespace

DISTCOMM_DEFINE_PLUGIN("unavailable", "unavailable test plugin", DISTCOMM_DEVICE_CUDA, 0, available, create)
