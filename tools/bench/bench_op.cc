#include "tools/bench/bench_op.h"

#include <algorithm>

#include "api/errors.h"

namespace distcomm {
namespace bench {

const std::vector<BenchOp>& all_bench_ops() {
  static const std::vector<BenchOp> ops = {
      BenchOp::kAllReduce, BenchOp::kAllGather, BenchOp::kReduceScatter, BenchOp::kBroadcast,
      BenchOp::kReduce,    BenchOp::kAllToAll,  BenchOp::kGather,        BenchOp::kScatter,
      BenchOp::kSendRecv,  BenchOp::kBarrier,
  };
  return ops;
}

const char* bench_op_name(BenchOp op) {
  switch (op) {
    case BenchOp::kAllReduce: return "all_reduce";
    case BenchOp::kAllGather: return "all_gather";
    case BenchOp::kReduceScatter: return "reduce_scatter";
    case BenchOp::kBroadcast: return "broadcast";
    case BenchOp::kReduce: return "reduce";
    case BenchOp::kAllToAll: return "all_to_all";
    case BenchOp::kGather: return "gather";
    case BenchOp::kScatter: return "scatter";
    case BenchOp::kSendRecv: return "send_recv";
    case BenchOp::kBarrier: return "barrier";
  }
  return "?";
}

BenchOp parse_bench_op(const std::string& name) {
  std::string known;
  for (BenchOp op : all_bench_ops()) {
    if (name == bench_op_name(op)) return op;
    known += std::string(known.empty() ? "" : ", ") + bench_op_name(op);
  }
  throw InvalidArgument("unknown --op '" + name + "': expected one of " + known);
}

bool op_reduces(BenchOp op) {
  return op == BenchOp::kAllReduce || op == BenchOp::kReduceScatter || op == BenchOp::kReduce;
}

bool op_has_root(BenchOp op) {
  return op == BenchOp::kBroadcast || op == BenchOp::kReduce || op == BenchOp::kGather ||
         op == BenchOp::kScatter;
}

bool op_has_out_of_place(BenchOp op) {
  return op != BenchOp::kAllReduce && op != BenchOp::kBroadcast && op != BenchOp::kReduce;
}

bool op_has_in_place(BenchOp op) {
  return op != BenchOp::kAllToAll && op != BenchOp::kSendRecv && op != BenchOp::kBarrier;
}

double bus_factor(BenchOp op, int nranks) {
  const double n = nranks;
  switch (op) {
    case BenchOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case BenchOp::kAllGather:
    case BenchOp::kReduceScatter:
    case BenchOp::kAllToAll:
    case BenchOp::kGather:
    case BenchOp::kScatter:
      return (n - 1) / n;
    case BenchOp::kBroadcast:
    case BenchOp::kReduce:
    case BenchOp::kSendRecv:
      return 1.0;
    case BenchOp::kBarrier:
      return 0.0;
  }
  return 0.0;
}

int64_t BufferShape::bytes(size_t element_size) const {
  return std::max(send_count, recv_count) * static_cast<int64_t>(element_size);
}

BufferShape buffer_shape(BenchOp op, int64_t requested_bytes, size_t element_size, int nranks) {
  const int64_t total = requested_bytes / static_cast<int64_t>(element_size);
  const int64_t chunk = total / nranks;
  BufferShape s;
  switch (op) {
    case BenchOp::kAllReduce:
    case BenchOp::kBroadcast:
    case BenchOp::kReduce:
    case BenchOp::kSendRecv:
      s.send_count = s.recv_count = s.chunk = s.param_count = total;
      break;
    case BenchOp::kAllGather:
    case BenchOp::kGather:
      s.send_count = s.chunk = s.param_count = chunk;
      s.recv_count = chunk * nranks;
      break;
    case BenchOp::kReduceScatter:
    case BenchOp::kScatter:
      s.recv_count = s.chunk = s.param_count = chunk;
      s.send_count = chunk * nranks;
      break;
    case BenchOp::kAllToAll:
      s.chunk = s.param_count = chunk;
      s.send_count = s.recv_count = chunk * nranks;
      break;
    case BenchOp::kBarrier:
      break;
  }
  return s;
}

}  // namespace bench
}  // namespace distcomm
