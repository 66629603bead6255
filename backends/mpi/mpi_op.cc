#include "backends/mpi/mpi_op.h"

#include <algorithm>
#include <string>

#include "api/errors.h"
#include "api/diagnostics/op_fingerprint.h"
#include "backends/mpi/mpi_types.h"
#include "backends/mpi/p2p_tag.h"
#include "backends/mpi/probed_messages.h"

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
    case Call::kAlltoallv:
      return MPI_Ialltoallv(input, op.send_counts.data(), op.send_displs.data(), op.type, data,
                            op.recv_counts.data(), op.recv_displs.data(), op.type, comm, request);
    case Call::kBarrier:
      return MPI_Ibarrier(comm, request);
    case Call::kSend:
      return MPI_Isend(data, n, op.type, op.root, wire_tag(op.tag, op.dtype), comm, request);
    case Call::kRecv:
      break;  // matched first (match_messages), then received with MPI_Imrecv
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

int slice_elements(const Op& op, int64_t index) {
  return static_cast<int>(std::min(op.count - index * op.max_count, op.max_count));
}

// What the sender sent: "4 float32 (16 bytes)", or "17 bytes" when the message is no whole
// number of its dtype's elements (or its dtype is unknown).
std::string message_text(const ProbedMessage& m) {
  DType dtype;
  if (sent_dtype(m.wire_tag, &dtype)) {
    const auto size = static_cast<MPI_Count>(element_size(dtype));
    if (m.bytes % size == 0) return elements_text(static_cast<int64_t>(m.bytes / size), dtype);
  }
  return std::to_string(m.bytes) + " bytes";
}

// Whether the message is what the recv's call `index` holds: the same dtype and size.
bool fits(const Op& op, int64_t index, const ProbedMessage& m) {
  DType dtype;
  return sent_dtype(m.wire_tag, &dtype) && dtype == op.dtype &&
         m.bytes == static_cast<MPI_Count>(slice_elements(op, index)) * static_cast<MPI_Count>(op.element_size);
}

std::exception_ptr mismatch_error(const Op& op, int64_t index, const ProbedMessage& m) {
  std::string which = op.max_count < op.count ? " (part " + std::to_string(index + 1) + " of a split recv)" : "";
  return std::make_exception_ptr(InvalidArgument(
      "recv from rank " + std::to_string(m.source) + " (tag " + std::to_string(op.tag) + ")" + which +
      ": this rank's tensor holds " + elements_text(slice_elements(op, index), op.dtype) + " but rank " +
      std::to_string(m.source) + " sends " + message_text(m) +
      "; a send and its recv must have the same count and dtype. The message was discarded and the tensor "
      "left untouched; the sender cannot tell (MPI completes its send), and the group stays usable"));
}

// Matches the recv's next messages (one per call, in order), and receives each into its
// slice of the tensor -- or, when its dtype or size differs, into a buffer that drops it.
std::exception_ptr match_messages(Op& op, MPI_Comm comm, ProbedMessages& probed) {
  const int64_t calls = call_count(op);
  while (op.matched < calls) {
    bool found = false;
    ProbedMessage m;
    int rc = probed.next(op.root, op.tag, comm, &found, &m);
    if (rc != MPI_SUCCESS) return error_from("MPI_Improbe", rc);
    if (!found) return nullptr;
    const int64_t index = op.matched;
    const int n = slice_elements(op, index);
    if (op.root == MPI_ANY_SOURCE) {
      op.work->set_source_rank(m.source);
      // The rest of a split recv is the rest of this sender's message, which follows in
      // order on this tag: probe that rank alone, so that another's cannot interleave.
      op.root = m.source;
    }
    op.requests.push_back(MPI_REQUEST_NULL);
    if (fits(op, index, m)) {
      rc = MPI_Imrecv(op.data + index * op.max_count * static_cast<int64_t>(op.element_size), n, op.type, &m.message,
                      &op.requests.back());
      ++op.matched;
    } else {
      rc = discard(m, op, &op.requests.back());
      op.op_error = mismatch_error(op, index, m);
      op.discard_index = op.requests.size() - 1;
      op.matched = calls;  // the op's later parts, if any, are not received
    }
    if (rc != MPI_SUCCESS) {
      op.requests.pop_back();
      return error_from(rc == MPI_ERR_NO_MEM ? "MPI_Imrecv (the buffer to discard a refused message)" : "MPI_Imrecv",
                        rc);
    }
  }
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
  if (op.agreement) return op.agreement->start(comm);  // the op's own calls start once it passes
  if (op.call == Call::kRecv) return nullptr;  // matched in advance()
  const int64_t calls = is_p2p(op.call) ? call_count(op) : 1;
  op.requests.reserve(static_cast<size_t>(calls));
  for (int64_t i = 0; i < calls; ++i) {
    if (auto error = start_next(op, comm)) return error;
  }
  return nullptr;
}

bool unmatched(const Op& op) { return op.call == Call::kRecv && op.matched < call_count(op); }

bool mpi_holds(const Op& op) {
  return op.completed < op.requests.size() || (op.agreement && op.agreement->pending());
}

std::exception_ptr advance(Op& op, MPI_Comm comm, ProbedMessages& probed, bool* done, bool may_match) {
  *done = false;
  if (op.agreement) {
    bool passed = false;
    if (auto error = op.agreement->advance(comm, &passed)) return error;
    if (!passed) return nullptr;
    op.agreement.reset();
    // The check was the barrier: no rank got its result before every rank had sent.
    if (op.call == Call::kBarrier) {
      *done = true;
      return nullptr;
    }
    if (auto error = start_next(op, comm)) return error;
  }
  if (op.call == Call::kRecv && may_match) {
    if (auto error = match_messages(op, comm, probed)) return error;
  }
  while (op.completed < op.requests.size()) {
    int flag = 0;
    const int rc = MPI_Test(&op.requests[op.completed], &flag, MPI_STATUS_IGNORE);
    // A discard's own error (none expected: its buffer holds the message) is not the op's.
    if (rc != MPI_SUCCESS && op.completed != op.discard_index) return error_from(call_name(op.call), rc);
    if (!flag && rc == MPI_SUCCESS) return nullptr;
    ++op.completed;
    // A split collective starts its next slice when the previous one is done.
    if (!is_p2p(op.call) && op.completed == op.requests.size() &&
        static_cast<int64_t>(op.requests.size()) < call_count(op)) {
      if (auto error = start_next(op, comm)) return error;
    }
  }
  *done = !unmatched(op);
  return nullptr;
}

void cancel_receives(Op& op) {
  if (op.call != Call::kRecv) return;
  for (size_t i = op.completed; i < op.requests.size(); ++i) {
    if (op.requests[i] != MPI_REQUEST_NULL) MPI_Cancel(&op.requests[i]);
  }
}

bool test_abandoned(Op& op) {
  if (op.agreement && !op.agreement->test_abandoned()) return false;
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
