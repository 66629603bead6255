// A collective as the shm engine runs it: a fixed number of rounds of the round protocol
// (shm_rounds.h), each split into what this rank writes to its own slot before posting
// and what it reads from its peers' slots once they have posted.
//
// Every rank builds the same op from the same arguments, so rounds() agrees everywhere.
// Data goes through the fixed-size slots in chunks, so the segment's size does not depend
// on the message's (a 2 GiB all_reduce takes more rounds, not more memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <climits>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "api/errors.h"
#include "api/reduce_op.h"
#include "api/tensor.h"
#include "api/work.h"
#include "backends/shm/shm_rounds.h"

namespace distcomm {
namespace shm {

// One round as an op sees it.
struct RoundView {
  int rank = 0;
  int size = 1;
  uint64_t round = 0;  // the group's round number
  // The round goes through the inline lines (the op said it carries at most kInlineBytes):
  // mine and of() are those lines' data, and `next` is not to be used.
  bool in_line = false;
  uint8_t* mine = nullptr;  // this rank's slot of this round
  // This rank's slot of the next round. An op that waits for every peer in this round may
  // write it in read(): every peer is then done with that slot's previous use.
  uint8_t* next = nullptr;
  const RoundCursor* cursor = nullptr;

  const uint8_t* of(int peer) const {
    if (peer == rank) return mine;
    return in_line ? cursor->inline_of(peer, round) : cursor->slot_of(peer, round);
  }
};

// What the Backend call described: views of its arguments, valid during the call only.
// An op copies what it needs when it is made; the engine's task holds the tensors (their
// memory) until the op ends (CollectiveTask). Tensors are flat; in-place ops pass their
// tensor as `out`.
struct CollectiveSpec {
  OpType type;
  const Tensor& out;
  const Tensor& in;
  ReduceOp op;
  int root;
  const std::vector<int64_t>& out_counts;  // all_to_all: elements from / to each rank
  const std::vector<int64_t>& in_counts;
};

class CollectiveOp {
 public:
  virtual ~CollectiveOp() = default;

  // May change after read() of an early round (all_to_all learns its sizes in round 0),
  // identically on every rank.
  virtual uint64_t rounds() const = 0;
  // How many bytes at the start of its slot round r uses on this rank, where the op keeps to
  // that (else SIZE_MAX). A round in which every rank uses at most kInlineBytes goes through
  // the inline lines (RoundView::in_line); the answer must allow every rank the same choice.
  virtual size_t round_bytes(uint64_t) const { return SIZE_MAX; }
  virtual void write(uint64_t r, const RoundView& v) = 0;
  // Whether round r needs `peer`'s slot.
  virtual bool waits_for(uint64_t r, int peer) const = 0;
  virtual void read(uint64_t r, const RoundView& v) = 0;
};

// Room for one op in the memory of its Work (ShmWork::op_space): every op but all_to_all
// fits, so that an op costs no allocation of its own (one malloc/free pair per op less).
// An op placed there is destroyed in place, and before its Work (CollectiveTask).
struct alignas(16) OpSpace {
  unsigned char bytes[128];
};
struct OpDelete {
  bool in_place = false;
  void operator()(CollectiveOp* op) const {
    if (in_place) {
      op->~CollectiveOp();
    } else {
      delete op;
    }
  }
};
using OpPtr = std::unique_ptr<CollectiveOp, OpDelete>;

// A T made in `space` where it fits (and space is given), else on the heap.
template <typename T, typename... Args>
OpPtr place_op(OpSpace* space, Args&&... args) {
  if constexpr (sizeof(T) <= sizeof(OpSpace) && alignof(T) <= alignof(OpSpace)) {
    if (space != nullptr) return OpPtr(new (space->bytes) T(std::forward<Args>(args)...), OpDelete{true});
  }
  return OpPtr(new T(std::forward<Args>(args)...), OpDelete{false});
}

// Thrown by read() for a disagreement every rank finds at the same round (all_to_all split
// sizes that do not pair up): a Desync, as on the other backends, but the op fails on every
// rank together, and the group stays in step and usable (so the ProcessGroup does not take
// it for the group's failure: AgreedDesync, api/errors.h).
using AgreedError = AgreedDesync;

struct GroupShape {
  int rank = 0;
  int size = 1;
  size_t slot_bytes = 0;
  size_t small_bytes = 0;
};

// The op `spec` describes, in `space` where it fits (null: on the heap).
OpPtr make_collective(const CollectiveSpec& spec, const GroupShape& group, OpSpace* space);

// --- pieces the op files share ---

OpPtr make_all_reduce(const CollectiveSpec& spec, const GroupShape& g, OpSpace* space);
OpPtr make_reduce(const CollectiveSpec& spec, const GroupShape& g, OpSpace* space);
OpPtr make_reduce_scatter(const CollectiveSpec& spec, const GroupShape& g, OpSpace* space);
OpPtr make_broadcast(const CollectiveSpec& spec, const GroupShape& g, OpSpace* space);
OpPtr make_all_gather(const CollectiveSpec& spec, const GroupShape& g, bool root_only, OpSpace* space);
OpPtr make_scatter(const CollectiveSpec& spec, const GroupShape& g, OpSpace* space);
OpPtr make_all_to_all(const CollectiveSpec& spec, const GroupShape& g, OpSpace* space);
OpPtr make_barrier(OpSpace* space);

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The bytes of a slot each of `parts` ranks gets in a round: whole 128-byte lines, so
// sub-slots of different ranks never share a cache line (and every dtype fits evenly).
size_t part_bytes(size_t slot_bytes, int parts);

// The bytes a data-moving op (broadcast, gather, all_gather) moves per
// round when it has `total` to move and a round holds at most `room`. A message that fits
// one round still goes in several pieces from 4 x kMinPipelinePiece up: the writer
// copies piece k + 1 while its readers copy piece k, so a 1 MiB broadcast costs about one
// copy and a quarter instead of two copies back to back. No piece is larger than
// kMaxPipelinePiece, whatever the slot, so that (as we read the figures; not proven with
// cache counters) a reader copies a piece while it is still in its writer's cache, not from
// memory. With 1 MiB pieces (the default slot) a 16 MiB broadcast between 2
// ranks ran at 8-12 GB/s busbw, with 256 KiB pieces at 20-28 GB/s (docs/shm.md); 128 KiB
// pieces were slower again at 1 MiB (more rounds). Pieces stay whole cache lines, and equal on every
// rank (they depend on the agreed sizes only).
constexpr size_t kMinPipelinePiece = size_t{64} << 10;
constexpr size_t kMaxPipelinePiece = size_t{256} << 10;
constexpr uint64_t kPipelinePieces = 4;
size_t pipeline_piece(size_t total, size_t room);

// memcpy that tolerates dst == src (an in-place op's own block) and zero bytes.
void copy_bytes(void* dst, const void* src, size_t bytes);

// Reduces one range: dst = init (if given) (op) the sources, in blocks small enough to
// stay in the L1 cache across the sources; each finished block is divided by
// `average_over` (AVG; 0 for none) and then copied to `copy_to` (if given). The sources
// are the slots of ranks first, first + 1, ... (all but `skip`) of `view`, at `offset`,
// taken in rank order so that every rank reducing the same range gets the same bits.
struct ReduceTask {
  uint8_t* dst = nullptr;
  const uint8_t* init = nullptr;
  const RoundView* view = nullptr;
  size_t offset = 0;
  int first = 0;
  int skip = -1;
  size_t bytes = 0;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::SUM;
  int average_over = 0;
  uint8_t* copy_to = nullptr;
};
void run_reduce(const ReduceTask& task);

}  // namespace shm
}  // namespace distcomm
