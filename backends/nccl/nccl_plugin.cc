// The nccl plugin's entry point: libdistcomm_nccl.so, serving CUDA tensors.
//
// available() asks CUDA how many devices it sees. Without one (no GPU, no driver, or a
// driver older than the runtime) it answers "no CUDA device: cudaGetDeviceCount: <CUDA's
// message>", which init_process_group reports as BackendUnavailable.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "api/errors.h"
#include "api/plugin/plugin.h"
#include "backends/nccl/cuda_status.h"
#include "backends/nccl/nccl_backend.h"

namespace {

int nccl_available(std::string* why) {
  try {
    return distcomm::nccl::visible_cuda_devices(why) > 0 ? 1 : 0;
  } catch (const std::exception& e) {  // a probe never throws: say what happened instead
    if (why) *why = std::string("no CUDA device: ") + e.what();
    return 0;
  }
}

distcomm::Backend* nccl_create(const distcomm::BackendOptions& options) {
  return new distcomm::nccl::NcclBackend(options);
}

}  // namespace

DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("nccl",
                       "nccl " DISTCOMM_STR(NCCL_MAJOR) "." DISTCOMM_STR(NCCL_MINOR) "." DISTCOMM_STR(
                           NCCL_PATCH) " (CUDA runtime " DISTCOMM_STR(CUDART_VERSION) "), distcomm " DISTCOMM_VERSION,
                       DISTCOMM_DEVICE_CUDA, 0, nccl_available, nccl_create, distcomm::nccl::kConfigKeys)
