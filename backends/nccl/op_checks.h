// What only NCCL imposes on an op's arguments, checked before anything is issued: CUDA
// tensors on a device this process sees, on one device per op, and a caller's stream on
// that device that is not being captured into a CUDA graph. Each failure is an
// InvalidArgument naming the op, so the group goes on (nothing was sent). No CUDA here:
// the stream's device and capture state are asked by the caller.
#pragma once

#include "api/tensor.h"
#include "api/work.h"

namespace distcomm {
namespace nccl {

// The CUDA device of t.
int cuda_device_of(OpType op, const Tensor& t, int visible_devices);
// The one CUDA device of a and b.
int same_cuda_device(OpType op, const Tensor& a, const Tensor& b, int visible_devices);
// The CUDA device of first, which every tensor of list must share (one op, one device).
int list_cuda_device(OpType op, const Tensor& first, const std::vector<Tensor>& list, int visible_devices);
// A caller's stream on another device than the op's tensors would order nothing (and CUDA
// refuses the event that would tie them), so it is refused before the op is issued.
void check_stream_device(OpType op, int op_device, int stream_device);

// A stream's capture state (cudaStreamIsCapturing). kImplicit: the legacy default stream
// while another stream of the process is captured in global mode (CUDA answers
// cudaErrorStreamCaptureImplicit).
enum class StreamCapture { kNone, kActive, kInvalidated, kImplicit };
// An op on a stream being captured would be recorded into the graph, not run: its end
// event could not be polled (cudaErrorCapturedEvent), so the watchdog would take it for a
// CUDA error and fail the group. Refused instead, until capture is supported (docs/nccl.md).
void check_not_capturing(OpType op, StreamCapture capture);

}  // namespace nccl
}  // namespace distcomm
