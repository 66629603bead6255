// A test-only plugin for CUDA tensors whose create() refuses (InvalidArgument, not
// BackendUnavailable): in a mixed group ("cpu:...,cuda:failing_create") it fails the whole
// creation after the CPU backend was made, so a test sees what happens to that one.
#include "api/errors.h"
#include "api/plugin/plugin.h"

namespace {

int available(std::string*) { return 1; }
distcomm::Backend* create(const distcomm::BackendOptions&) {
  throw distcomm::InvalidArgument("failing_create test plugin: refuses to be created");
}

}  // namespace

DISTCOMM_DEFINE_PLUGIN("failing_create", "failing_create test plugin", DISTCOMM_DEVICE_CUDA, 0, available, create)
