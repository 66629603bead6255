// CUDA memory for the benchmark's buffers, for a backend that serves CUDA tensors (nccl).
//
// The CUDA runtime is opened with dlopen when first needed, not linked: distcomm-bench is
// built and installed on machines without CUDA, where it must still start and run the host
// backends. Every failure to find or use a device is a BackendUnavailable whose message
// starts with "no CUDA device", said before any rank is spawned (bench_main.cc).
#pragma once

#include <cstdint>
#include <string>

#include "api/device.h"
#include "api/tensor.h"

namespace distcomm {
namespace bench {

// Throws BackendUnavailable("no CUDA device: <why>") unless this machine has more than
// `highest_index` CUDA devices (one per local rank, as nccl-tests runs one GPU per rank).
void require_cuda_devices(int highest_index, const std::string& why_needed);

// count elements of dtype on cuda:device, freed when the last copy of the Tensor goes.
Tensor cuda_empty(int64_t count, DType dtype, int device);

// Byte copies between a host tensor and a CUDA tensor of the same numel and dtype, on the
// legacy default stream (ordered after an op that Work::wait() made that stream wait for).
void copy_host_to_device(const Tensor& host, const Tensor& device);
void copy_device_to_host(const Tensor& device, const Tensor& host);
void zero_device(const Tensor& device);

// Waits until every op queued on the device has finished: a timed iteration ends when the
// GPU is done, not when the op was queued (Work::wait() only orders the caller's stream).
void synchronize_device(int device);

}  // namespace bench
}  // namespace distcomm
