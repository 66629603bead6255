// How distcomm's dtypes, reduce ops and errors map onto MPI's.
//
// MPI has no 16-bit floats: float16 and bfloat16 travel as two-byte contiguous datatypes
// of their own, reduced by user-defined MPI ops that call distcomm's reduce_into kernels,
// so every (op, dtype) pair reduce_supported() allows works. AVG and PREMUL_SUM have no
// MPI op: the backend reports them as not native and the ProcessGroup runs SUM and scales.
#pragma once

#include <mpi.h>

#include <exception>
#include <string>

#include "api/dtype.h"
#include "api/reduce_op.h"

namespace distcomm {
namespace mpi {

// Creates the float16/bfloat16 datatypes and their user ops, the float/double MIN and MAX
// ops that keep a NaN, and the int8/uint8 SUM that wraps (Open MPI's op/avx saturates)
// (mpi_types.cc). Once, after MPI_Init.
void register_reduced_float_types();

MPI_Datatype datatype_of(DType dtype);

// The MPI op for a natively reduced (op, dtype) pair (not AVG or PREMUL_SUM).
MPI_Op op_of(ReduceOp op, DType dtype);

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string error_string(int code);

// The distcomm error for a failed MPI call: InvalidArgument when MPI refused the
// arguments, PeerFailure for everything else (a transport or a peer failed).
std::exception_ptr error_from(const std::string& call, int code);

// "MPI_THREAD_MULTIPLE" for a thread level.
const char* thread_level_name(int level);

}  // namespace mpi
}  // namespace distcomm
