#include "backends/mpi/mpi_op.h"

#include <algorithm>
#include <string>

#include "api/errors.h"
#include "api/diagnostics/op_fingerprint.h"
#include "api/diagnostics/refused_transfers.h"
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

// A send starts every call at once (the order of messages between two ranks is the order
// of the ops); a split one sends its header first (p2p_split.h).
std::exception_ptr start_send(Op& op, MPI_Comm comm) {
  const int64_t calls = call_count(op);
  op.requests.reserve(static_cast<size_t>(calls + (calls > 1 ? 1 : 0)));
  if (calls > 1) {
    op.header = SplitHeader{op.count, op.max_count, static_cast<int32_t>(op.dtype), kSplitHeaderMagic};
    op.requests.push_back(MPI_REQUEST_NULL);
    const int rc = MPI_Isend(&op.header, static_cast<int>(sizeof(SplitHeader)), MPI_BYTE, op.root,
                             split_header_tag(op.tag), comm, &op.requests.back());
    if (rc != MPI_SUCCESS) {
      op.requests.pop_back();
      return error_from("MPI_Isend (the header of a split send)", rc);
    }
  }
  for (int64_t i = 0; i < calls; ++i) {
    op.requests.push_back(MPI_REQUEST_NULL);
    const int rc = start_call(op, i, comm, &op.requests.back());
    if (rc != MPI_SUCCESS) {
      op.requests.pop_back();
      return error_from(call_name(op.call), rc);
    }
  }
  return nullptr;
}

int64_t elements_bytes(const Op& op, int64_t elements) { return elements * static_cast<int64_t>(op.element_size); }

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

// What a split sender sent: "2500 float32 (10000 bytes) in 3 messages of up to 1000".
std::string split_text(const SplitHeader& h) {
  return elements_text(h.total, static_cast<DType>(h.dtype)) + " in " + std::to_string(piece_count(h)) +
         " messages of up to " + std::to_string(h.piece) + " elements (max_count_per_call)";
}

// Whether the sender's dtype (from the tag) is the recv's and the message holds `elements`.
bool holds(const Op& op, const ProbedMessage& m, int64_t elements) {
  DType dtype;
  return sent_dtype(m.wire_tag, &dtype) && dtype == op.dtype && elements <= INT_MAX &&
         m.bytes == static_cast<MPI_Count>(elements_bytes(op, elements));
}

// The recv's own failure: the sender sent another total or dtype (told before any byte of
// it landed in the tensor).
std::exception_ptr mismatch_error(const Op& op, int source, const std::string& sent) {
  return std::make_exception_ptr(InvalidArgument(
      "recv from rank " + std::to_string(source) + " (tag " + std::to_string(op.tag) +
      "): this rank's tensor holds " + elements_text(op.count, op.dtype) + " but rank " + std::to_string(source) +
      " sends " + sent +
      "; a send and its recv must have the same count and dtype. The message was discarded and the tensor "
      "left untouched; the sender cannot tell (MPI completes its send), and the group stays usable"));
}

// Not the recv's mistake but its sender's: a header or piece that no split send of this
// build makes. Its pieces cannot be counted or placed, so the group fails.
std::exception_ptr malformed_error(const Op& op, int source, const std::string& what) {
  return std::make_exception_ptr(Desync(
      "recv from rank " + std::to_string(source) + " (tag " + std::to_string(op.tag) + "): " + what +
      "; the ranks run different builds of the mpi backend, or its messages were corrupted"));
}

// Whether the request at `index` has completed (it is tested here, out of advance()'s
// order: a completed request becomes MPI_REQUEST_NULL, which advance() then passes at once).
int request_done(Op& op, size_t index, bool* done) {
  int flag = 0;
  const int rc = MPI_Test(&op.requests[index], &flag, MPI_STATUS_IGNORE);
  *done = flag != 0;
  return rc;
}

// The header has arrived: the pieces go into the tensor if total and dtype are the recv's,
// else each is drained.
std::exception_ptr read_header(Op& op) {
  const int source = op.root;
  const std::string problem = split_header_problem(op.header);
  if (!problem.empty()) return malformed_error(op, source, "its split message's header is malformed: " + problem);
  op.pieces = piece_count(op.header);
  if (static_cast<DType>(op.header.dtype) != op.dtype || op.header.total != op.count) {
    op.op_error = mismatch_error(op, source, split_text(op.header));
    op.discard_index = op.requests.size();
    // Until its pieces are drained the recv stays unfinished, smaller than the send still
    // pending on the sender: the stall watch must not take that for a stall of the group.
    if (op.work) note_refusal_draining(*op.work);
  }
  return nullptr;
}

std::exception_ptr imrecv_error(int rc) {
  return error_from(rc == MPI_ERR_NO_MEM ? "MPI_Imrecv (the buffer to discard a refused message)" : "MPI_Imrecv", rc);
}

// Matches the recv's messages in order and receives each: the sender's one message, or its
// header and then its pieces (p2p_split.h), into the tensor -- or, when the sender's total
// or dtype differs, into scratch buffers that drop them, so that nothing of the message
// is left for a later recv and nothing of it lands in the tensor.
std::exception_ptr match_messages(Op& op, MPI_Comm comm, ProbedMessages& probed) {
  while (unmatched(op)) {
    if (op.header_index != SIZE_MAX) {
      bool done = false;
      const int rc = request_done(op, op.header_index, &done);
      if (rc != MPI_SUCCESS) return error_from("MPI_Imrecv (the header of a split message)", rc);
      if (!done) return nullptr;
      op.header_index = SIZE_MAX;
      if (auto error = read_header(op)) return error;
      continue;
    }
    if (op.op_error && !op.discard_buffers.empty()) {
      // Draining a refused split message: the next piece once the last one is in, so that
      // scratch holds one piece, not the whole message. A discard's error is not the op's.
      // (Should the test fail, the buffer stays with the op: MPI may still hold it.)
      bool done = false;
      const int rc = request_done(op, op.requests.size() - 1, &done);
      if (rc == MPI_SUCCESS && !done) return nullptr;
      if (rc == MPI_SUCCESS) op.discard_buffers.clear();
    }
    bool found = false;
    ProbedMessage m;
    int rc = probed.next(op.root, op.tag, comm, &found, &m);
    if (rc != MPI_SUCCESS) return error_from("MPI_Improbe", rc);
    if (!found) return nullptr;
    const bool first = op.pieces < 0;
    if (first && op.root == MPI_ANY_SOURCE) {
      op.work->set_source_rank(m.source);
      // The rest of a split message follows in order from this sender on this tag: probe
      // that rank alone, so that another's cannot interleave.
      op.root = m.source;
    }
    op.requests.push_back(MPI_REQUEST_NULL);
    if (first && is_split_header(m.wire_tag)) {
      if (m.bytes != static_cast<MPI_Count>(sizeof(SplitHeader))) {
        rc = discard(m, op, &op.requests.back());  // so that MPI lets go of it
        if (rc != MPI_SUCCESS) op.requests.pop_back();
        return malformed_error(op, m.source, "a split message's header of " + std::to_string(m.bytes) + " bytes");
      }
      rc = MPI_Imrecv(&op.header, static_cast<int>(sizeof(SplitHeader)), MPI_BYTE, &m.message, &op.requests.back());
      if (rc != MPI_SUCCESS) {
        op.requests.pop_back();
        return error_from("MPI_Imrecv (the header of a split message)", rc);
      }
      op.header_index = op.requests.size() - 1;
      continue;
    }
    if (first) {
      // Unsplit: the one message is the whole send.
      op.pieces = 1;
      if (holds(op, m, op.count)) {
        rc = MPI_Imrecv(op.data, static_cast<int>(op.count), op.type, &m.message, &op.requests.back());
      } else {
        rc = discard(m, op, &op.requests.back());
        op.op_error = mismatch_error(op, m.source, message_text(m));
        op.discard_index = op.requests.size() - 1;
      }
    } else if (op.op_error) {
      rc = discard(m, op, &op.requests.back());
    } else {
      const int64_t index = op.matched;
      const int64_t n = piece_elements(op.header, index);
      if (!holds(op, m, n)) {
        rc = discard(m, op, &op.requests.back());
        if (rc != MPI_SUCCESS) op.requests.pop_back();
        return malformed_error(op, m.source, "piece " + std::to_string(index + 1) + " of its split message of " +
                                                 split_text(op.header) + " has " + message_text(m));
      }
      rc = MPI_Imrecv(op.data + elements_bytes(op, index * op.header.piece), static_cast<int>(n), op.type,
                      &m.message, &op.requests.back());
    }
    if (rc != MPI_SUCCESS) {
      op.requests.pop_back();
      return imrecv_error(rc);
    }
    ++op.matched;
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
  if (op.call == Call::kSend) return start_send(op, comm);
  return start_next(op, comm);  // a split collective starts its next slice in advance()
}

bool unmatched(const Op& op) { return op.call == Call::kRecv && (op.pieces < 0 || op.matched < op.pieces); }

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
    if (rc != MPI_SUCCESS && op.completed < op.discard_index) return error_from(call_name(op.call), rc);
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
