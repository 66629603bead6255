#include "backends/mpi/probed_messages.h"

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

std::unique_ptr<Op> ProbedMessages::discard_all() {
  if (kept_.empty()) return nullptr;
  auto op = std::make_unique<Op>();
  op->call = Call::kRecv;
  for (ProbedMessage& m : kept_) {
    MPI_Request request = MPI_REQUEST_NULL;
    // Into a buffer of 0 bytes: it ends truncated, which is what discarding is.
    if (MPI_Imrecv(nullptr, 0, MPI_BYTE, &m.message, &request) == MPI_SUCCESS) op->requests.push_back(request);
  }
  kept_.clear();
  return op;
}

}  // namespace mpi
}  // namespace distcomm
