#include "tools/bench/collective_runner.h"

#include <cstring>
#include <string>

#include "api/errors.h"
#include "tools/bench/cuda_buffers.h"

namespace distcomm {
namespace bench {
namespace {

// n views of consecutive blocks of storage: the list form gather and scatter take.
std::vector<Tensor> blocks_of(const Tensor& storage, int n, int64_t block) {
  std::vector<Tensor> blocks;
  for (int i = 0; i < n; ++i) blocks.push_back(storage.flat_slice(i * block, block));
  return blocks;
}

}  // namespace

Tensor CollectiveRunner::flat(int64_t count) const {
  return cuda_device_ >= 0 ? cuda_empty(count, flags_.dtype, cuda_device_) : Tensor::empty({count}, flags_.dtype);
}

CollectiveRunner::CollectiveRunner(ProcessGroup& pg, const BenchFlags& flags, int64_t requested_bytes,
                                   bool in_place)
    : pg_(pg), flags_(flags), rank_(pg.rank()), nranks_(pg.size()), cuda_device_(flags.cuda_device) {
  const BenchOp op = flags.op;
  check_root(flags, nranks_);
  if (op == BenchOp::kSendRecv && nranks_ < 2) {
    throw InvalidArgument("send_recv needs at least 2 ranks (each sends to the next one)");
  }
  const DType dtype = flags.dtype;
  shape_ = buffer_shape(op, requested_bytes, element_size(dtype), nranks_);
  const int64_t chunk = shape_.chunk;
  const bool is_root = rank_ == flags.root;
  switch (op) {
    case BenchOp::kAllReduce:
    case BenchOp::kBroadcast:
    case BenchOp::kReduce:
      // distcomm's forms of these are in-place only: one buffer is input and output.
      output_storage_ = flat(shape_.recv_count);
      output_ = input_ = output_storage_;
      break;
    case BenchOp::kAllGather:
    case BenchOp::kGather: {
      const bool receives = op == BenchOp::kAllGather || is_root;
      if (receives) output_storage_ = output_ = flat(shape_.recv_count);
      if (receives && in_place) {
        input_ = output_storage_.flat_slice(rank_ * chunk, chunk);
      } else {
        input_storage_ = input_ = flat(chunk);
      }
      if (op == BenchOp::kGather && is_root) blocks_ = blocks_of(output_storage_, nranks_, chunk);
      break;
    }
    case BenchOp::kReduceScatter:
    case BenchOp::kScatter: {
      const bool sends = op == BenchOp::kReduceScatter || is_root;
      if (sends) input_storage_ = input_ = flat(shape_.send_count);
      if (sends && in_place) {
        output_ = input_storage_.flat_slice(rank_ * chunk, chunk);
      } else {
        output_storage_ = output_ = flat(chunk);
      }
      if (op == BenchOp::kScatter && is_root) blocks_ = blocks_of(input_storage_, nranks_, chunk);
      break;
    }
    case BenchOp::kAllToAll:
    case BenchOp::kSendRecv:
      input_storage_ = input_ = flat(shape_.send_count);
      output_storage_ = output_ = flat(shape_.recv_count);
      break;
    case BenchOp::kBarrier:
      break;
  }
}

DataPattern CollectiveRunner::pattern(uint64_t seed) const {
  return DataPattern(flags_.dtype, flags_.redop, op_reduces(flags_.op), nranks_, seed);
}

std::vector<ExpectedSegment> CollectiveRunner::segments() const {
  return expected_segments(flags_.op, rank_, nranks_, flags_.root, shape_.chunk);
}

void CollectiveRunner::fill_inputs(uint64_t seed) {
  // Zero first: in-place inputs are views of the output, and a rank that receives must not
  // find the right answer already there.
  if (output_storage_.defined() && output_storage_.nbytes() > 0) {
    if (cuda_device_ >= 0) {
      zero_device(output_storage_);
    } else {
      std::memset(output_storage_.data(), 0, output_storage_.nbytes());
    }
  }
  bool sends = input_.defined();
  if (flags_.op == BenchOp::kBroadcast) sends = rank_ == flags_.root;
  if (!sends || input_.numel() == 0) return;
  if (cuda_device_ < 0) {
    pattern(seed).fill(rank_, 0, input_.data(), input_.numel());
    return;
  }
  // The pattern is written on the host and copied over, outside the timed calls.
  const Tensor host = Tensor::empty({input_.numel()}, flags_.dtype);
  pattern(seed).fill(rank_, 0, host.data(), host.numel());
  copy_host_to_device(host, input_);
}

Tensor CollectiveRunner::output_on_host() const {
  if (cuda_device_ < 0) return output_;
  const Tensor host = Tensor::empty({output_.numel()}, flags_.dtype);
  copy_device_to_host(output_, host);
  return host;
}

void CollectiveRunner::run() {
  run_and_wait();
  // Work::wait() on a CUDA tensor makes the current stream wait for the op, not the host:
  // the iteration's time must end when the GPU has finished it.
  if (cuda_device_ >= 0) synchronize_device(cuda_device_);
}

void CollectiveRunner::run_and_wait() {
  switch (flags_.op) {
    case BenchOp::kAllReduce: {
      AllReduceOptions o;
      o.op = flags_.redop;
      pg_.all_reduce(output_, o)->wait();
      return;
    }
    case BenchOp::kBroadcast: {
      BroadcastOptions o;
      o.root = flags_.root;
      pg_.broadcast(output_, o)->wait();
      return;
    }
    case BenchOp::kReduce: {
      ReduceOptions o;
      o.root = flags_.root;
      o.op = flags_.redop;
      pg_.reduce(output_, o)->wait();
      return;
    }
    case BenchOp::kAllGather:
      pg_.all_gather_into_tensor(output_, input_)->wait();
      return;
    case BenchOp::kGather: {
      GatherOptions o;
      o.root = flags_.root;
      pg_.gather(blocks_, input_, o)->wait();
      return;
    }
    case BenchOp::kReduceScatter: {
      ReduceScatterOptions o;
      o.op = flags_.redop;
      pg_.reduce_scatter_tensor(output_, input_, o)->wait();
      return;
    }
    case BenchOp::kScatter: {
      ScatterOptions o;
      o.root = flags_.root;
      pg_.scatter(output_, blocks_, o)->wait();
      return;
    }
    case BenchOp::kAllToAll:
      pg_.all_to_all_single(output_, input_)->wait();
      return;
    case BenchOp::kSendRecv: {
      // Even ranks send first, odd ranks receive first: a ring stays deadlock-free even on a
      // backend whose send waits for the matching receive.
      const int next = (rank_ + 1) % nranks_;
      const int prev = (rank_ + nranks_ - 1) % nranks_;
      WorkPtr first, second;
      if (rank_ % 2 == 0) {
        first = pg_.send(input_, next);
        second = pg_.recv(output_, prev);
      } else {
        first = pg_.recv(output_, prev);
        second = pg_.send(input_, next);
      }
      first->wait();
      second->wait();
      return;
    }
    case BenchOp::kBarrier:
      pg_.barrier()->wait();
      return;
  }
}

int64_t CollectiveRunner::count_wrong(uint64_t seed) const {
  const std::vector<ExpectedSegment> segs = segments();
  if (segs.empty()) return 0;
  return bench::count_wrong(pattern(seed), segs, output_on_host().data());
}

bool CollectiveRunner::corrupt_result() {
  // One rank corrupts, so a run reports exactly one wrong element per checked result: the
  // root where only the root has a result, else the last rank.
  const BenchOp op = flags_.op;
  const bool root_only = op == BenchOp::kReduce || op == BenchOp::kGather;
  if (rank_ != (root_only ? flags_.root : nranks_ - 1)) return false;
  for (const ExpectedSegment& s : segments()) {
    if (s.count == 0) continue;
    Tensor host = output_on_host();
    const double old_value = host.item(s.offset);
    const double new_value = flags_.dtype == DType::kBool ? (old_value != 0 ? 0 : 1) : (old_value == 1 ? 3 : 1);
    host.set_item(s.offset, new_value);
    if (cuda_device_ >= 0) copy_host_to_device(host, output_);
    return true;
  }
  return false;
}

}  // namespace bench
}  // namespace distcomm
