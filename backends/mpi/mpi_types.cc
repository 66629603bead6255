#include "backends/mpi/mpi_types.h"

#include <cstdint>

#include "api/errors.h"

namespace distcomm {
namespace mpi {
namespace {

MPI_Datatype g_float16 = MPI_DATATYPE_NULL;
MPI_Datatype g_bfloat16 = MPI_DATATYPE_NULL;
MPI_Op g_reduced_float_ops[ReduceOp::PREMUL_SUM + 1];

// MPI calls this with its own buffers: the datatype handle tells float16 from bfloat16.
template <ReduceOp::Kind kKind>
void reduce_reduced_floats(void* in, void* inout, int* len, MPI_Datatype* type) noexcept {
  const DType dtype = *type == g_bfloat16 ? DType::kBFloat16 : DType::kFloat16;
  // inout = inout (op) in. The kernels do not throw for these four ops on 16-bit floats,
  // which matters: an exception must not unwind through MPI's C frames.
  reduce_into(inout, in, static_cast<size_t>(*len), dtype, ReduceOp(kKind));
}

// MIN and MAX for float and double, which MPI's built-in MPI_MIN/MPI_MAX leave to a plain
// comparison: a NaN was dropped or kept by which rank held it (min of {1, NaN, 3} came out
// 3). The core's kernels give NaN, as torch and the other backends do.
MPI_Op g_nan_min = MPI_OP_NULL;
MPI_Op g_nan_max = MPI_OP_NULL;

// noexcept: an exception must not unwind through MPI's C frames (the kernels do not throw
// for these ops and dtypes; one that did would end the process here, said, not unwind).
template <ReduceOp::Kind kKind>
void reduce_floats_with_nan(void* in, void* inout, int* len, MPI_Datatype* type) noexcept {
  const DType dtype = *type == MPI_DOUBLE ? DType::kFloat64 : DType::kFloat32;
  reduce_into(inout, in, static_cast<size_t>(*len), dtype, ReduceOp(kKind));
}

// SUM for int8 and uint8 that wraps (two's complement), as torch, gloo and shm do. Open
// MPI 4.1's op/avx component (ompi/mca/op/avx/op_avx_functions.c, picked on any x86 CPU with
// AVX) implements MPI_SUM on 8- and 16-bit integers with the *saturating* vector adds
// (_mm*_adds_epi8/_epu8): 200 + 200 in uint8 came out 255, 100 + 100 in int8 127, for every
// vector-sized run of elements (from 16 elements up), while the scalar tail wrapped. Its
// other ops on int8/uint8/int32/int64 (PROD, MIN, MAX, BAND, BOR, BXOR, and SUM on 32 and
// 64 bits) give the exact results (checked at 1..4096 elements); only these two need an op
// of their own. Adding as uint8 gives int8's two's-complement sum too (same bits). MPI calls
// it once per chunk of its algorithm, so it must be fast: plain loops over restrict
// parameters, in 64-byte blocks of a fixed trip count, which GCC 12 vectorises at -O2
// (paddb; a single loop of unknown count it leaves scalar under -O2's cheap cost model).
MPI_Op g_byte_sum = MPI_OP_NULL;

void add_bytes(uint8_t* __restrict inout, const uint8_t* __restrict in, int n) {
  constexpr int kBlock = 64;
  int i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int j = 0; j < kBlock; ++j) inout[i + j] = static_cast<uint8_t>(inout[i + j] + in[i + j]);
  }
  for (; i < n; ++i) inout[i] = static_cast<uint8_t>(inout[i] + in[i]);
}

void sum_bytes_wrapping(void* in, void* inout, int* len, MPI_Datatype*) noexcept {
  add_bytes(static_cast<uint8_t*>(inout), static_cast<const uint8_t*>(in), *len);
}

MPI_Datatype two_byte_type() {
  MPI_Datatype t;
  MPI_Type_contiguous(2, MPI_BYTE, &t);
  MPI_Type_commit(&t);
  return t;
}

}  // namespace

void register_reduced_float_types() {
  g_float16 = two_byte_type();
  g_bfloat16 = two_byte_type();
  MPI_Type_set_name(g_float16, const_cast<char*>("distcomm_float16"));
  MPI_Type_set_name(g_bfloat16, const_cast<char*>("distcomm_bfloat16"));
  for (auto& op : g_reduced_float_ops) op = MPI_OP_NULL;
  MPI_Op_create(&reduce_reduced_floats<ReduceOp::SUM>, 1, &g_reduced_float_ops[ReduceOp::SUM]);
  MPI_Op_create(&reduce_reduced_floats<ReduceOp::PRODUCT>, 1, &g_reduced_float_ops[ReduceOp::PRODUCT]);
  MPI_Op_create(&reduce_reduced_floats<ReduceOp::MIN>, 1, &g_reduced_float_ops[ReduceOp::MIN]);
  MPI_Op_create(&reduce_reduced_floats<ReduceOp::MAX>, 1, &g_reduced_float_ops[ReduceOp::MAX]);
  MPI_Op_create(&reduce_floats_with_nan<ReduceOp::MIN>, 1, &g_nan_min);
  MPI_Op_create(&reduce_floats_with_nan<ReduceOp::MAX>, 1, &g_nan_max);
  MPI_Op_create(&sum_bytes_wrapping, 1, &g_byte_sum);
}

MPI_Datatype datatype_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kFloat16: return g_float16;
    case DType::kBFloat16: return g_bfloat16;
    case DType::kInt8: return MPI_INT8_T;
    case DType::kUInt8: return MPI_UINT8_T;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kBool: return MPI_C_BOOL;
  }
  throw InvalidArgument("mpi backend: unknown dtype");
}

MPI_Op op_of(ReduceOp op, DType dtype) {
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
    const MPI_Op user_op = g_reduced_float_ops[op.kind];
    if (user_op != MPI_OP_NULL) return user_op;
  } else if (dtype == DType::kBool) {
    // MPI_C_BOOL takes only the logical ops: sum and max are "any", product and min "all".
    switch (op.kind) {
      case ReduceOp::SUM: case ReduceOp::MAX: case ReduceOp::BOR: return MPI_LOR;
      case ReduceOp::PRODUCT: case ReduceOp::MIN: case ReduceOp::BAND: return MPI_LAND;
      case ReduceOp::BXOR: return MPI_LXOR;
      default: break;
    }
  } else {
    const bool floating = dtype == DType::kFloat32 || dtype == DType::kFloat64;
    if (floating && op.kind == ReduceOp::MIN && g_nan_min != MPI_OP_NULL) return g_nan_min;
    if (floating && op.kind == ReduceOp::MAX && g_nan_max != MPI_OP_NULL) return g_nan_max;
    const bool byte = dtype == DType::kInt8 || dtype == DType::kUInt8;
    if (byte && op.kind == ReduceOp::SUM && g_byte_sum != MPI_OP_NULL) return g_byte_sum;
    switch (op.kind) {
      case ReduceOp::SUM: return MPI_SUM;
      case ReduceOp::PRODUCT: return MPI_PROD;
      case ReduceOp::MIN: return MPI_MIN;
      case ReduceOp::MAX: return MPI_MAX;
      case ReduceOp::BAND: return MPI_BAND;
      case ReduceOp::BOR: return MPI_BOR;
      case ReduceOp::BXOR: return MPI_BXOR;
      default: break;
    }
  }
  throw InvalidArgument(std::string("mpi backend: no MPI op for reduce op ") + op.name() + " on " +
                        dtype_name(dtype));
}

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

std::exception_ptr error_from(const std::string& call, int code) {
  int error_class = MPI_ERR_UNKNOWN;
  MPI_Error_class(code, &error_class);
  const std::string what = call + " failed: " + error_string(code);
  switch (error_class) {
    case MPI_ERR_BUFFER: case MPI_ERR_COUNT: case MPI_ERR_TYPE: case MPI_ERR_TAG:
    case MPI_ERR_RANK: case MPI_ERR_ROOT: case MPI_ERR_OP: case MPI_ERR_ARG:
    case MPI_ERR_TRUNCATE:
      return std::make_exception_ptr(InvalidArgument(what));
    default:
      return std::make_exception_ptr(PeerFailure(what));
  }
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown MPI thread level";
}

}  // namespace mpi
}  // namespace distcomm
