#include "backends/shm/shm_op_line.h"

#include <algorithm>

namespace distcomm {
namespace shm {

OpDescription describe_op(const OpFingerprint& f) {
  OpDescription d{};
  d.seq = f.seq;
  d.count = f.count;
  d.ndim = std::min<uint8_t>(f.ndim, OpFingerprint::kMaxDims);
  std::copy(f.dims, f.dims + d.ndim, d.dims);
  d.factor = f.reduction.factor;
  d.root = f.root;
  d.op = static_cast<uint32_t>(f.op);
  d.dtype = static_cast<uint32_t>(f.dtype);
  d.reduction = static_cast<uint8_t>(f.reduction.kind);
  d.has_tensor = f.has_tensor;
  d.has_reduction = f.has_reduction;
  d.internal = f.internal;
  return d;
}

OpFingerprint fingerprint_of(const OpDescription& d) {
  OpFingerprint f;
  f.op = static_cast<OpType>(d.op);
  f.seq = d.seq;
  f.internal = d.internal != 0;
  f.has_tensor = d.has_tensor != 0;
  f.dtype = static_cast<DType>(d.dtype);
  f.count = d.count;
  f.ndim = std::min<uint8_t>(d.ndim, OpFingerprint::kMaxDims);
  std::copy(d.dims, d.dims + f.ndim, f.dims);
  f.root = d.root;
  f.has_reduction = d.has_reduction != 0;
  f.reduction = ReduceOp(static_cast<ReduceOp::Kind>(d.reduction));
  f.reduction.factor = d.factor;
  return f;
}

}  // namespace shm
}  // namespace distcomm
