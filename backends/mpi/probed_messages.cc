#include "backends/mpi/probed_messages.h"

#include <algorithm>
#include <climits>
#include <new>
#include <string>

#include "api/logging.h"
#include "backends/mpi/mpi_types.h"
#include "backends/mpi/p2p_tag.h"

namespace distcomm {
namespace mpi {

int ProbedMessages::next(int source, int tag, MPI_Comm comm, bool* found, ProbedMessage* out) {
  *found = false;
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if ((source == MPI_ANY_SOURCE || it->source == source) && user_tag(it->wire_tag) == tag) {
      *out = *it;
      kept_.erase(it);
      *found = true;
      return MPI_SUCCESS;
    }
  }
  for (;;) {
    int flag = 0;
    MPI_Status status;
    ProbedMessage m;
    const int rc = MPI_Improbe(source, MPI_ANY_TAG, comm, &flag, &m.message, &status);
    if (rc != MPI_SUCCESS || !flag) return rc;
    m.source = status.MPI_SOURCE;
    m.wire_tag = status.MPI_TAG;
    MPI_Get_elements_x(&status, MPI_BYTE, &m.bytes);
    if (user_tag(m.wire_tag) == tag) {
      *out = m;
      *found = true;
      return MPI_SUCCESS;
    }
    kept_.push_back(m);
  }
}

int discard(ProbedMessage& m, Op& op, MPI_Request* request) {
  // MPI's count is int: a message over INT_MAX bytes (a sender's call holds at most
  // INT_MAX elements) is received as elements of the sender's dtype.
  MPI_Datatype type = MPI_BYTE;
  MPI_Count count = m.bytes;
  DType dtype;
  if (count > INT_MAX && sent_dtype(m.wire_tag, &dtype) && m.bytes % element_size(dtype) == 0) {
    type = datatype_of(dtype);
    count = m.bytes / static_cast<MPI_Count>(element_size(dtype));
  }
  if (count > INT_MAX) return MPI_ERR_COUNT;
  std::unique_ptr<char[]> buffer(new (std::nothrow) char[static_cast<size_t>(std::max<MPI_Count>(m.bytes, 1))]);
  if (!buffer) return MPI_ERR_NO_MEM;
  const int rc = MPI_Imrecv(buffer.get(), static_cast<int>(count), type, &m.message, request);
  if (rc == MPI_SUCCESS) op.discard_buffers.push_back(std::move(buffer));
  return rc;
}

std::unique_ptr<Op> ProbedMessages::discard_all() {
  if (kept_.empty()) return nullptr;
  auto op = std::make_unique<Op>();
  op->call = Call::kRecv;
  for (ProbedMessage& m : kept_) {
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = discard(m, *op, &request);
    if (rc == MPI_SUCCESS) {
      op->requests.push_back(request);
      continue;
    }
    // The message stays matched and unreceived: its sender's send cannot complete. The
    // group has failed already (that is why it is discarded), so the sender's op ends with
    // that failure or its timeout; say why here, where it is known.
    log_line("mpi: could not discard a " + std::to_string(static_cast<long long>(m.bytes)) +
             "-byte message from rank " + std::to_string(m.source) + " at its group's failure (" +
             (rc == MPI_ERR_NO_MEM ? std::string("no memory for a buffer of its size")
                                   : rc == MPI_ERR_COUNT ? std::string("too many elements for one MPI call")
                                                         : "MPI error " + std::to_string(rc)) +
             "): that rank's send of it will end only with the group's failure or its timeout");
  }
  kept_.clear();
  return op;
}

}  // namespace mpi
}  // namespace distcomm
