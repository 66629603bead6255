#include "backends/shm/shm_collective.h"

#include <algorithm>
#include <cstring>

namespace distcomm {
namespace shm {
namespace {

// Fits the L1 data cache of current x86 and ARM cores with room for the sources' lines.
constexpr size_t kReduceBlockBytes = 8192;

class Barrier final : public CollectiveOp {
 public:
  uint64_t rounds() const override { return 1; }
  size_t round_bytes(uint64_t) const override { return 0; }
  void write(uint64_t, const RoundView&) override {}
  bool waits_for(uint64_t, int) const override { return true; }
  void read(uint64_t, const RoundView&) override {}
};

}  // namespace

size_t part_bytes(size_t slot_bytes, int parts) {
  return slot_bytes / static_cast<size_t>(parts) / kLineBytes * kLineBytes;
}

size_t pipeline_piece(size_t total, size_t room) {
  const size_t quarter = ceil_div(ceil_div(total, kPipelinePieces), kLineBytes) * kLineBytes;
  return std::max<size_t>(1, std::min({room, kMaxPipelinePiece, std::max(quarter, kMinPipelinePiece)}));
}

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  std::memcpy(dst, src, bytes);
}

void run_reduce(const ReduceTask& t) {
  const size_t esize = element_size(t.dtype);
  for (size_t done = 0; done < t.bytes; done += kReduceBlockBytes) {
    const size_t len = std::min(kReduceBlockBytes, t.bytes - done);
    const size_t count = len / esize;
    uint8_t* dst = t.dst + done;
    if (t.init) copy_bytes(dst, t.init + done, len);
    for (int p = t.first; p < t.view->size; ++p) {
      if (p != t.skip) reduce_into(dst, t.view->of(p) + t.offset + done, count, t.dtype, t.op);
    }
    if (t.average_over > 0) divide_in_place(dst, count, t.dtype, t.average_over);
    if (t.copy_to) std::memcpy(t.copy_to + done, dst, len);
  }
}

OpPtr make_barrier(OpSpace* space) { return place_op<Barrier>(space); }

OpPtr make_collective(const CollectiveSpec& spec, const GroupShape& g, OpSpace* space) {
  switch (spec.type) {
    case OpType::kAllReduce: return make_all_reduce(spec, g, space);
    case OpType::kReduce: return make_reduce(spec, g, space);
    case OpType::kReduceScatter: return make_reduce_scatter(spec, g, space);
    case OpType::kBroadcast: return make_broadcast(spec, g, space);
    case OpType::kAllGather: return make_all_gather(spec, g, false, space);
    case OpType::kGather: return make_all_gather(spec, g, true, space);
    case OpType::kScatter: return make_scatter(spec, g, space);
    case OpType::kAllToAll: return make_all_to_all(spec, g, space);
    case OpType::kBarrier: return make_barrier(space);
    default: break;
  }
  throw InvalidArgument(std::string("shm: ") + op_type_name(spec.type) + " is not a collective");
}

}  // namespace shm
}  // namespace distcomm
