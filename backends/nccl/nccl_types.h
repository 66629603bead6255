// distcomm's dtypes and reduce ops in NCCL's terms.
#pragma once

#include <nccl.h>

#include <string>

#include "api/dtype.h"
#include "api/reduce_op.h"

namespace distcomm {
namespace nccl {

// NCCL has no bool: it travels as uint8, which is also how it is stored (one byte, 0 or 1).
ncclDataType_t nccl_dtype(DType dtype);

// Whether NCCL reduces (op, dtype) itself; *why says what it lacks. NCCL has no bitwise
// reductions: on bool, BAND and BOR are MIN and MAX, but on integers they are refused.
bool nccl_reduces(ReduceOp op, DType dtype, std::string* why = nullptr);

// The built-in NCCL op for (op, dtype). Throws InvalidArgument where !nccl_reduces, and
// for PREMUL_SUM, which is not built in (make_redop creates it).
ncclRedOp_t builtin_redop(ReduceOp op, DType dtype);

// The reduction for one NCCL call on comm: a built-in op, or for PREMUL_SUM one made with
// ncclRedOpCreatePreMulSum (the factor as a host scalar of the tensor's type), in which
// case *created is set and the caller destroys it with ncclRedOpDestroy once the call has
// been issued.
ncclRedOp_t make_redop(ReduceOp op, DType dtype, ncclComm_t comm, bool* created);

}  // namespace nccl
}  // namespace distcomm
