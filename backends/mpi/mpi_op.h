// One distcomm op expressed as MPI nonblocking calls, and how it advances.
//
// Every op runs as MPI's nonblocking variant (MPI_Iallreduce, MPI_Isend, ...) so that the
// backend's thread can watch deadlines with MPI_Test instead of sitting inside MPI.
// MPI counts are int: an elementwise op (all_reduce, reduce, broadcast, send, recv) on more
// than max_count elements runs as several calls on consecutive slices -- a collective one
// call after another, a send or recv all calls at once, so that the order of messages
// between two ranks stays the order of the ops.
//
// A collective first runs its agreement check (mpi_agreement.h) when it has one. A recv
// matches its message before anything lands (MPI_Improbe, then MPI_Imrecv), so it knows
// the message's size, and its dtype from the tag (p2p_tag.h, probed_messages.h): a
// message of another size or dtype than the tensor is received into a scratch buffer of
// its own size and dropped (its sender completes), and the recv alone ends with
// InvalidArgument naming both; the tensor is untouched and the group stays usable.
// A split send sends a header with its total first (p2p_split.h): the recv compares totals
// before any piece lands, and takes the pieces at the sender's piece size or drains every
// one of them, one scratch buffer at a time. A recv from any rank takes the rank of its
// first message (the header) as the source of the rest (a sender's calls go out together,
// in order).
#pragma once

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "api/tensor.h"
#include "backends/mpi/mpi_agreement.h"
#include "backends/mpi/mpi_work.h"
#include "backends/mpi/p2p_split.h"

namespace distcomm {
namespace mpi {

class ProbedMessages;

enum class Call : uint8_t {
  kAllreduce,
  kReduce,
  kBcast,
  kAllgather,
  kGather,
  kScatter,
  kReduceScatter,
  kAlltoallv,
  kBarrier,
  kSend,
  kRecv,
};

const char* call_name(Call call);  // "MPI_Iallreduce"

// Point-to-point calls do not hold their group's queue (see op_queue.h).
inline bool is_p2p(Call call) { return call == Call::kSend || call == Call::kRecv; }

struct Op {
  using Clock = std::chrono::steady_clock;

  Call call = Call::kBarrier;
  std::shared_ptr<MpiWork> work;
  Clock::time_point deadline = Clock::time_point::max();
  std::chrono::milliseconds timeout{0};  // for the Timeout message

  // data: the tensor reduced or broadcast in place, the output, or what send sends.
  // input: the separate input of gather-like ops.
  char* data = nullptr;
  const char* input = nullptr;
  // all_gather/gather: this rank's input already sits in its block of the output;
  // scatter: the root's output already sits in its block of the input (MPI_IN_PLACE).
  bool in_place = false;
  int64_t count = 0;  // elements: the whole tensor, or one rank's block
  size_t element_size = 0;
  DType dtype = DType::kFloat32;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op reduce_op = MPI_OP_NULL;
  int root = 0;  // root, dst, or src (MPI_ANY_SOURCE)
  bool is_root = false;
  int tag = 0;  // the user's (p2p_tag.h: MPI's carries the dtype too)
  int64_t max_count = INT_MAX;
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;  // alltoallv
  Tensor keep_alive[2];  // owned storage and scratch copies that the MPI calls use

  int64_t bytes() const { return count * static_cast<int64_t>(element_size); }

  // Collectives when the check is on: runs before the op's own calls.
  std::unique_ptr<Agreement> agreement;

  // Progress, under the progress lock only: the requests started so far, how many are done.
  std::vector<MPI_Request> requests;
  size_t completed = 0;
  // A split send: the header it sends first; a recv: the header it received (p2p_split.h).
  SplitHeader header;
  // A recv: how many messages its sender's transfer has (-1 until the first one matched:
  // then 1, or the header's piece count), and how many of those have matched.
  int64_t pieces = -1;
  int64_t matched = 0;
  // A recv receiving a header: that request's index until it has completed.
  size_t header_index = SIZE_MAX;
  // A recv whose sender sent another size or dtype: the first request that discards its
  // message (every later one does too), and the error the op ends with once they have
  // (the group stays usable).
  size_t discard_index = SIZE_MAX;
  std::exception_ptr op_error;
  // Where discarded messages land: each as large as its message, alive while MPI holds the
  // request (probed_messages.h says why a message is never received truncated). A refused
  // split message's pieces are drained one at a time, so this holds one piece at most.
  std::vector<std::unique_ptr<char[]>> discard_buffers;
};

// How many MPI calls the op's data takes (1 unless an elementwise op exceeds max_count; a
// split send also sends its header, a recv follows its sender's count).
int64_t call_count(const Op& op);

// Starts the op: its first call, or every call of a send (a recv matches in advance()).
// Null or the error.
std::exception_ptr start(Op& op, MPI_Comm comm);

// Tests the running calls and starts the next slice of a split collective. Sets *done
// when every call has finished (op.op_error then says whether the op failed on its own).
// Returns null or an error that leaves the group unusable (MPI's, a Desync).
// probed: the group's messages matched before their recv came (probed_messages.h).
// may_match: whether a recv may match a message now; false while an earlier recv that
// could take the same message has not matched yet (MPI's order of posted receives).
std::exception_ptr advance(Op& op, MPI_Comm comm, ProbedMessages& probed, bool* done, bool may_match = true);

// Whether a recv still has messages to match: its first, or pieces its sender announced.
bool unmatched(const Op& op);

// Whether MPI still holds requests of the op (its buffers must stay alive).
bool mpi_holds(const Op& op);

// Cancels the receives of an op that is given up, so MPI does not write into the tensor
// later (a started collective cannot be cancelled).
void cancel_receives(Op& op);

// Tests an abandoned op's requests; true once all have finished (or failed).
bool test_abandoned(Op& op);

}  // namespace mpi
}  // namespace distcomm
