#include "backends/nccl/nccl_types.h"

#include "api/errors.h"
#include "api/half.h"
#include "backends/nccl/cuda_status.h"

namespace distcomm {
namespace nccl {

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kInt8: return ncclInt8;
    case DType::kUInt8: return ncclUint8;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kBool: return ncclUint8;
  }
  throw InvalidArgument("nccl: unknown dtype");
}

bool nccl_reduces(ReduceOp op, DType dtype, std::string* why) {
  std::string base_why;
  if (!reduce_supported(op, dtype, &base_why)) {
    if (why) *why = base_why;
    return false;
  }
  const bool bitwise = op.kind == ReduceOp::BAND || op.kind == ReduceOp::BOR || op.kind == ReduceOp::BXOR;
  // bool is 0/1 in a byte: "and" is MIN and "or" is MAX, but "xor" has no NCCL equivalent.
  const bool ok = !bitwise || (dtype == DType::kBool && op.kind != ReduceOp::BXOR);
  if (!ok && why) {
    *why = std::string("the nccl backend cannot reduce ") + dtype_name(dtype) + " with " + op.name() +
           ": NCCL has no bitwise reductions (only sum, prod, min, max, avg, premul_sum; band and "
           "bor on bool)";
  }
  return ok;
}

ncclRedOp_t builtin_redop(ReduceOp op, DType dtype) {
  std::string why;
  if (!nccl_reduces(op, dtype, &why)) throw InvalidArgument(why);
  if (dtype == DType::kBool) {
    // On 0/1 bytes, sum and max are "any" and product and min are "all" (as in reduce_into);
    // a byte sum could overflow past 1, max cannot.
    switch (op.kind) {
      case ReduceOp::SUM: case ReduceOp::MAX: case ReduceOp::BOR: return ncclMax;
      default: return ncclMin;  // PRODUCT, MIN, BAND
    }
  }
  switch (op.kind) {
    case ReduceOp::SUM: return ncclSum;
    case ReduceOp::PRODUCT: return ncclProd;
    case ReduceOp::MIN: return ncclMin;
    case ReduceOp::MAX: return ncclMax;
    case ReduceOp::AVG: return ncclAvg;
    default:
      throw InvalidArgument(std::string("nccl: ") + op.name() + " is not a built-in NCCL reduction");
  }
}

ncclRedOp_t make_redop(ReduceOp op, DType dtype, ncclComm_t comm, bool* created) {
  *created = false;
  if (op.kind != ReduceOp::PREMUL_SUM) return builtin_redop(op, dtype);
  std::string why;
  if (!nccl_reduces(op, dtype, &why)) throw InvalidArgument(why);
  // The scalar has the tensor's own type; NCCL reads it before the call returns.
  float f32 = static_cast<float>(op.factor);
  double f64 = op.factor;
  Half f16(f32);
  BFloat16 bf16(f32);
  void* scalar = &f32;
  if (dtype == DType::kFloat64) scalar = &f64;
  if (dtype == DType::kFloat16) scalar = &f16;
  if (dtype == DType::kBFloat16) scalar = &bf16;
  ncclRedOp_t redop;
  const ncclResult_t r = ncclRedOpCreatePreMulSum(&redop, scalar, nccl_dtype(dtype), ncclScalarHostImmediate, comm);
  if (r != ncclSuccess) throw_nccl_error("ncclRedOpCreatePreMulSum", r, comm);
  *created = true;
  return redop;
}

}  // namespace nccl
}  // namespace distcomm
