// The messages of one group's communicator that a recv matched (MPI_Improbe) on the way to
// its own, kept until their recv comes.
//
// A recv probes its source with MPI_ANY_TAG, because the tag's low bits carry the sender's
// dtype (p2p_tag.h) and MPI cannot match on part of a tag. The probe matches the source's
// next message whatever its tag, and a matched message leaves MPI's queue: one of another
// tag is kept here, in order, and a later recv of that tag looks here before it probes.
// This keeps MPI's order -- per source and tag, messages are received in the order they
// were sent -- and a recv that finds its message costs what it did before: one probe.
// Collectives' messages never match: MPI_ANY_TAG matches only the tags of point-to-point
// messages.
#pragma once

#include <mpi.h>

#include <deque>
#include <memory>

#include "backends/mpi/mpi_op.h"

namespace distcomm {
namespace mpi {

struct ProbedMessage {
  MPI_Message message = MPI_MESSAGE_NULL;
  int source = -1;
  int wire_tag = 0;  // p2p_tag.h
  MPI_Count bytes = 0;
};

// Under the runtime's progress lock only.
// Receives matched message m into a buffer of its own size, kept in op.discard_buffers,
// so that it can be dropped: its sender's send then completes. Never into a smaller buffer:
// Open MPI 4.1's ob1 writes a message beyond its eager size whole even when the receive is
// truncated (over TCP the receiver crashed in mca_btl_tcp_frag_recv; over shared memory
// the single copy failed with EFAULT). Returns MPI's error code, MPI_ERR_NO_MEM when the
// buffer cannot be had.
int discard(ProbedMessage& m, Op& op, MPI_Request* request);

class ProbedMessages {
 public:
  // The next message for a recv of user tag `tag` from `source` (or MPI_ANY_SOURCE): the
  // oldest kept one, else the next MPI has, keeping those of other tags that come first.
  // Sets *found; returns MPI's error code.
  int next(int source, int tag, MPI_Comm comm, bool* found, ProbedMessage* out);
  bool empty() const { return kept_.empty(); }
  // Receives every kept message and drops it (discard()), for a group that fails: the op
  // whose requests and buffers MPI then holds until they end; null if nothing was kept.
  std::unique_ptr<Op> discard_all();

 private:
  std::deque<ProbedMessage> kept_;
};

}  // namespace mpi
}  // namespace distcomm
