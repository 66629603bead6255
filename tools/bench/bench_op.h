// The collectives the benchmark measures, and the facts about each that the tables need:
// buffer shapes, nccl-tests' bus-bandwidth factor, which columns apply.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distcomm {
namespace bench {

enum class BenchOp {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kGather,
  kScatter,
  kSendRecv,  // every rank sends to rank+1 and receives from rank-1 (a ring of pairs)
  kBarrier,   // latency only: no data
};

const std::vector<BenchOp>& all_bench_ops();
const char* bench_op_name(BenchOp op);  // "all_reduce", ...
// Accepts the names above; throws InvalidArgument listing them.
BenchOp parse_bench_op(const std::string& name);

bool op_reduces(BenchOp op);   // has a redop column (all_reduce, reduce_scatter, reduce)
bool op_has_root(BenchOp op);  // broadcast, reduce, gather, scatter
// distcomm's all_reduce, broadcast and reduce work on one tensor (as torch.distributed's
// do), so they have no out-of-place form; all_to_all and send_recv have no in-place form
// (the input is read while the output is written); a barrier has one form, printed as
// out-of-place. Missing forms print N/A.
bool op_has_out_of_place(BenchOp op);
bool op_has_in_place(BenchOp op);

// nccl-tests' factor from algorithm bandwidth to bus bandwidth for n ranks:
// all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all, gather, scatter (n-1)/n;
// broadcast, reduce, send_recv 1; barrier 0 (it moves no data).
double bus_factor(BenchOp op, int nranks);

// Element counts of one rank's buffers for a requested size, laid out as nccl-tests does:
// the requested size is the larger buffer, and chunked ops round it down to a multiple of
// nranks elements.
struct BufferShape {
  int64_t send_count = 0;  // elements this rank sends from (root's, for scatter)
  int64_t recv_count = 0;  // elements this rank receives into (root's, for gather)
  int64_t chunk = 0;       // elements per rank block (== send_count for whole-buffer ops)
  int64_t param_count = 0; // the "count" column: elements the op is called with per rank
  int64_t bytes(size_t element_size) const;  // the "size" column: the larger buffer
};
BufferShape buffer_shape(BenchOp op, int64_t requested_bytes, size_t element_size, int nranks);

}  // namespace bench
}  // namespace distcomm
