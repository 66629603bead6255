#include "api/cuda_stream.h"

namespace {

// The innermost guard's stream; `set` tells nullptr-as-a-stream (the legacy one, chosen by
// a guard) from no guard at all.
thread_local CUstream_st* current = nullptr;
thread_local bool set = false;

}  // namespace

extern "C" CUstream_st* distcomm_current_cuda_stream(CUstream_st* fallback) { return set ? current : fallback; }

namespace distcomm {

CudaStreamGuard::CudaStreamGuard(CUstream_st* stream) : previous_(current), previous_set_(set) {
  current = stream;
  set = true;
}

CudaStreamGuard::~CudaStreamGuard() {
  current = previous_;
  set = previous_set_;
}

}  // namespace distcomm
