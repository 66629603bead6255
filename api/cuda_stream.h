// The calling thread's current CUDA stream, as c10's CUDAStreamGuard sets it.
//
// An op on CUDA tensors runs after the work queued on a stream, and Work::wait() makes a
// stream (not the host) wait for the op. Which stream: the op's options.cuda_stream when
// it names one, else the thread's current stream, set for a scope by a CudaStreamGuard;
// with neither, CUDA's legacy default stream (nullptr), which synchronises with every
// blocking stream of the device, so that nothing overlaps. One guard per thread sets the
// stream of every op that thread issues, without a cuda_stream in each call:
//
//   distcomm::CudaStreamGuard on(compute_stream);
//   auto w = pg->all_reduce(grad);   // after what is queued on compute_stream
//   w->wait();                       // compute_stream waits for it; the host does not
//
// Host ops (gloo, mpi, shm) ignore it. No CUDA header needed: cudaStream_t is CUstream_st*.
#pragma once

struct CUstream_st;

// The core's accessor, weak: a plugin built with this header still loads in a core that
// predates it (it then sees no current stream).
extern "C" CUstream_st* distcomm_current_cuda_stream(CUstream_st* fallback) __attribute__((weak));

namespace distcomm {

// The stream of the innermost CudaStreamGuard alive on this thread; `fallback` when none is.
inline CUstream_st* current_cuda_stream(CUstream_st* fallback = nullptr) {
  return distcomm_current_cuda_stream ? distcomm_current_cuda_stream(fallback) : fallback;
}

// Makes `stream` (nullptr: the legacy default stream) this thread's current CUDA stream
// until the guard goes; guards nest. Use it on one device at a time: an op on another
// device's tensors is refused with the stream named.
class CudaStreamGuard {
 public:
  explicit CudaStreamGuard(CUstream_st* stream);
  ~CudaStreamGuard();
  CudaStreamGuard(const CudaStreamGuard&) = delete;
  CudaStreamGuard& operator=(const CudaStreamGuard&) = delete;

 private:
  CUstream_st* previous_;
  bool previous_set_;
};

}  // namespace distcomm
