#include "backends/mpi/mpi_op.h"

#include <algorithm>
#include <string>

#include "api/errors.h"
#include "backends/mpi/mpi_types.h"

namespace distcomm {
namespace mpi {
namespace {

bool is_elementwise(Call call) {
  return call == Call::kAllreduce || call == Call::kReduce || call == Call::kBcast || is_p2p(call);
}

void* in_place_or(const Op& op, const void* buffer) {
  return op.in_place ? MPI_IN_PLACE : const_cast<void*>(buffer);
}

// Starts call number `index` of the op (a slice of the tensor for split elementwise ops).
int start_call(Op& op, int64_t index, MPI_Comm comm, MPI_Request* request) {
  const int64_t offset = index * op.max_count;
  const int n = static_cast<int>(std::min(op.count - offset, op.max_count));
  char* data = op.data ? op.data + offset * static_cast<int64_t>(op.element_size) : nullptr;
  const void* input = op.input;
  switch (op.call) {
    case Call::kAllreduce:
      return MPI_Iallreduce(MPI_IN_PLACE, data, n, op.type, op.reduce_op, comm, request);
    case Call::kReduce:
      // The root reduces into its own tensor; the others' tensors are only read.
      return MPI_Ireduce(op.is_root ? MPI_IN_PLACE : data, op.is_root ? data : nullptr, n, op.type,
                         op.reduce_op, op.root, comm, request);
    case Call::kBcast:
      return MPI_Ibcast(data, n, op.type, op.root, comm, request);
    case Call::kAllgather:
      return MPI_Iallgather(in_place_or(op, input), n, op.type, data, n, op.type, comm, request);
    case Call::kGather:
      return MPI_Igather(in_place_or(op, input), n, op.type, data, n, op.type, op.root, comm, request);
    case Call::kScatter:
      return MPI_Iscatter(input, n, op.type, in_place_or(op, data), n, op.type, op.root, comm, request);
    case Call::kReduceScatter:
      return MPI_Ireduce_scatter_block(input, data, n, op.type, op.reduce_op, comm, request);
    case Call::kAlltoall:
      return MPI_Ialltoall(input, n, op.type, data, n, op.type, comm, request);
    case Call::kAlltoallv:
      return MPI_Ialltoallv(input, op.send_counts.data(), op.send_displs.data(), op.type, data,
                            op.recv_counts.data(), op.recv_displs.data(), op.type, comm, request);
    case Call::kBarrier:
      return MPI_Ibarrier(comm, request);
    case Call::kSend:
      return MPI_Isend(data, n, op.type, op.root, op.tag, comm, request);
    case Call::kRecv:
      return MPI_Irecv(data, n, op.type, op.root, op.tag, comm, request);
  }
  return MPI_ERR_INTERN;
}

std::exception_ptr start_next(Op& op, MPI_Comm comm) {
  const int64_t index = static_cast<int64_t>(op.requests.size());
  op.requests.push_back(MPI_REQUEST_NULL);
  const int rc = start_call(op, index, comm, &op.requests.back());
  if (rc == MPI_SUCCESS) return nullptr;
  op.requests.pop_back();
  return error_from(call_name(op.call), rc);
}

// A recv must get exactly the elements its tensor holds: MPI reports a longer message as
// MPI_ERR_TRUNCATE, but a shorter one would silently leave the tail of the tensor stale.
std::exception_ptr check_received(Op& op, size_t index, const MPI_Status& status) {
  const int64_t expected =
      std::min(op.count - static_cast<int64_t>(index) * op.max_count, op.max_count);
  int got = 0;
  MPI_Get_count(&status, op.type, &got);
  if (got != expected) {
    return std::make_exception_ptr(InvalidArgument(
        "recv: the message from rank " + std::to_string(status.MPI_SOURCE) + " holds " +
        std::to_string(got) + " elements but the tensor " + std::to_string(expected) +
        "; send and recv must use tensors of the same size"));
  }
  if (op.root == MPI_ANY_SOURCE) op.work->set_source_rank(status.MPI_SOURCE);
  return nullptr;
}

}  // namespace

const char* call_name(Call call) {
  switch (call) {
    case Call::kAllreduce: return "MPI_Iallreduce";
    case Call::kReduce: return "MPI_Ireduce";
    case Call::kBcast: return "MPI_Ibcast";
    case Call::kAllgather: return "MPI_Iallgather";
    case Call::kGather: return "MPI_Igather";
    case Call::kScatter: return "MPI_Iscatter";
    case Call::kReduceScatter: return "MPI_Ireduce_scatter_block";
    case Call::kAlltoall: return "MPI_Ialltoall";
    case Call::kAlltoallv: return "MPI_Ialltoallv";
    case Call::kBarrier: return "MPI_Ibarrier";
    case Call::kSend: return "MPI_Isend";
    case Call::kRecv: return "MPI_Irecv";
  }
  return "MPI_?";
}

int64_t call_count(const Op& op) {
  if (!is_elementwise(op.call) || op.count <= op.max_count) return 1;
  return (op.count + op.max_count - 1) / op.max_count;
}

std::exception_ptr start(Op& op, MPI_Comm comm) {
  const int64_t calls = is_p2p(op.call) ? call_count(op) : 1;
  op.requests.reserve(static_cast<size_t>(calls));
  for (int64_t i = 0; i < calls; ++i) {
    if (auto error = start_next(op, comm)) return error;
  }
  return nullptr;
}

std::exception_ptr advance(Op& op, MPI_Comm comm, bool* done) {
  *done = false;
  while (op.completed < op.requests.size()) {
    int flag = 0;
    MPI_Status status;
    const int rc = MPI_Test(&op.requests[op.completed], &flag, &status);
    if (rc != MPI_SUCCESS) return error_from(call_name(op.call), rc);
    if (!flag) return nullptr;
    if (op.call == Call::kRecv) {
      if (auto error = check_received(op, op.completed, status)) return error;
    }
    ++op.completed;
    // A split collective starts its next slice when the previous one is done.
    if (op.completed == op.requests.size() && static_cast<int64_t>(op.requests.size()) < call_count(op)) {
      if (auto error = start_next(op, comm)) return error;
    }
  }
  *done = true;
  return nullptr;
}

void cancel_receives(Op& op) {
  if (op.call != Call::kRecv) return;
  for (size_t i = op.completed; i < op.requests.size(); ++i) {
    if (op.requests[i] != MPI_REQUEST_NULL) MPI_Cancel(&op.requests[i]);
  }
}

bool test_abandoned(Op& op) {
  while (op.completed < op.requests.size()) {
    int flag = 0;
    if (MPI_Test(&op.requests[op.completed], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag) {
      return false;
    }
    ++op.completed;
  }
  return true;
}

}  // namespace mpi
}  // namespace distcomm
