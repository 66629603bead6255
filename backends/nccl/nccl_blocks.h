// Blocks of a tensor as NCCL moves them: a block's address, and ncclSend/ncclRecv of a
// block that skip an empty one. Both sides of a block know its count, so both skip it,
// and empty blocks (all_to_all's, a list's empty tensors) cost nothing and never hand
// NCCL a null buffer.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "api/tensor.h"
#include "backends/nccl/nccl_types.h"

namespace distcomm {
namespace nccl {

// Byte address of element `offset` of t.
inline char* block_at(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.data()) + offset * static_cast<int64_t>(element_size(t.dtype()));
}

inline size_t count_of(const Tensor& t) { return static_cast<size_t>(t.numel()); }

inline ncclResult_t send_block(const char* data, int64_t n, DType dtype, int peer, ncclComm_t comm, cudaStream_t s) {
  if (n == 0) return ncclSuccess;
  return ncclSend(data, static_cast<size_t>(n), nccl_dtype(dtype), peer, comm, s);
}

inline ncclResult_t recv_block(char* data, int64_t n, DType dtype, int peer, ncclComm_t comm, cudaStream_t s) {
  if (n == 0) return ncclSuccess;
  return ncclRecv(data, static_cast<size_t>(n), nccl_dtype(dtype), peer, comm, s);
}

// The whole of t, sent to or received from peer.
inline ncclResult_t send_all(const Tensor& t, int peer, ncclComm_t comm, cudaStream_t s) {
  return send_block(block_at(t, 0), t.numel(), t.dtype(), peer, comm, s);
}
inline ncclResult_t recv_all(const Tensor& t, int peer, ncclComm_t comm, cudaStream_t s) {
  return recv_block(block_at(t, 0), t.numel(), t.dtype(), peer, comm, s);
}

}  // namespace nccl
}  // namespace distcomm
