#include "backends/shm/shm_backend.h"

#include "api/errors.h"
#include "api/logging.h"
#include "backends/shm/shm_rendezvous.h"
#include "backends/shm/shm_work.h"

namespace distcomm {
namespace shm {
namespace {

// now + timeout; never, for a timeout too long to add.
Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  const Clock::time_point now = Clock::now();
  if (timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now)) {
    return Clock::time_point::max();
  }
  return now + timeout;
}

// Whether the group's DISTCOMM_DEBUG level (the core gives it as "debug" where it is not OFF:
// api/group/group_creation.cc) is INFO or more. A core that does not give it: OFF.
bool at_info(const std::map<std::string, std::string>& config) {
  const auto level = config.find("debug");
  return level != config.end() && (level->second == "INFO" || level->second == "DETAIL");
}

}  // namespace

void ShmWork::wait(std::chrono::milliseconds timeout) {
  if (forked_since_issue(*this)) return Work::wait(timeout);  // before driving or blocking (work.h)
  if (!is_completed()) {
    if (!engine_->wait_for(*this, timeout)) {
      throw Timeout(description() + ": not finished after " + std::to_string(timeout.count()) +
                    " ms of waiting (Work::wait timeout); the op is still running");
    }
  }
  Work::wait(timeout);  // rethrows the op's error
}

ShmBackend::ShmBackend(BackendOptions options)
    : Backend(std::move(options)), config_(parse_shm_config(Backend::options().config)) {
  engine_ = std::make_shared<Engine>(join_group(Backend::options(), config_), config_, Backend::options().store);
  if (at_info(Backend::options().config)) {
    // One line per rank and creation: what shm decided about waiting, and from what.
    log_line("shm group '" + Backend::options().group_name + "' rank " + std::to_string(rank()) + " of " +
             std::to_string(size()) + ": " + engine_->wait_decision().text);
  }
  name_world_ranks(engine_->failure(), Backend::options().global_ranks);
  if (Backend::options().store && size() > 1) {
    StallWatchOptions w;
    w.rank = rank();
    w.size = size();
    w.board = Backend::options().store;
    watch_ = std::make_unique<StallWatch>(w, engine_->failure());
  }
  engine_->start();
  shape_.rank = rank();
  shape_.size = size();
  shape_.slot_bytes = engine_->group().layout().slot_bytes();
  shape_.small_bytes = config_.small_bytes;
}

ShmBackend::~ShmBackend() { shutdown(); }

void ShmBackend::shutdown() {
  engine_->shutdown();
  if (watch_) watch_->stop();  // after the ops: a failure they end with may ask it
}

void ShmBackend::watch(const OpContext& ctx, const WorkPtr& work) {
  if (watch_) watch_->issued(ctx.fingerprint, work, ctx.timeout);
}

std::vector<OpType> ShmBackend::supported_ops() const {
  return {OpType::kAllReduce, OpType::kBroadcast, OpType::kReduce,   OpType::kAllGather,
          OpType::kGather,    OpType::kScatter,   OpType::kReduceScatter, OpType::kAllToAll,
          OpType::kBarrier,   OpType::kSend,      OpType::kRecv,     OpType::kRecvAnySource};
}

bool ShmBackend::reduces_natively(ReduceOp op, DType dtype) const {
  if (op.kind == ReduceOp::AVG) return !avg_scales_inputs(dtype);
  return op.kind != ReduceOp::PREMUL_SUM;
}

CollectiveSpec ShmBackend::spec_of(OpType type, const Tensor& out, const Tensor& in, ReduceOp op, int root) const {
  return CollectiveSpec{type, out, in, op, root, no_counts_, no_counts_};
}

WorkPtr ShmBackend::collective(const OpContext& ctx, const CollectiveSpec& spec) {
  auto work = std::make_shared<ShmWork>(spec.type, ctx, engine_);
  CollectiveTask task;
  task.work = work;
  task.op = make_collective(spec, shape_, work->op_space());
  task.agreement = ctx.fingerprint.agreement_hash();
  task.description = describe_op(ctx.fingerprint);
  task.timeout = ctx.timeout;
  task.deadline = deadline_after(ctx.timeout);
  watch(ctx, work);
  engine_->submit(std::move(task), spec.out, spec.in);  // holds the tensors if the op runs on
  return work;
}

WorkPtr ShmBackend::all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) {
  return collective(ctx, spec_of(OpType::kAllReduce, tensor, no_tensor_, opts.op, 0));
}

WorkPtr ShmBackend::broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) {
  return collective(ctx, spec_of(OpType::kBroadcast, tensor, no_tensor_, ReduceOp::SUM, opts.root));
}

WorkPtr ShmBackend::reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) {
  return collective(ctx, spec_of(OpType::kReduce, tensor, no_tensor_, opts.op, opts.root));
}

WorkPtr ShmBackend::all_gather(Tensor& output, const Tensor& input, const AllGatherOptions&, const OpContext& ctx) {
  return collective(ctx, spec_of(OpType::kAllGather, output, input, ReduceOp::SUM, 0));
}

WorkPtr ShmBackend::gather(Tensor& output, const Tensor& input, const GatherOptions& opts, const OpContext& ctx) {
  return collective(ctx, spec_of(OpType::kGather, output, input, ReduceOp::SUM, opts.root));
}

WorkPtr ShmBackend::scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts, const OpContext& ctx) {
  return collective(ctx, spec_of(OpType::kScatter, output, input, ReduceOp::SUM, opts.root));
}

WorkPtr ShmBackend::reduce_scatter(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts,
                                   const OpContext& ctx) {
  return collective(ctx, spec_of(OpType::kReduceScatter, output, input, opts.op, 0));
}

WorkPtr ShmBackend::all_to_all(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_counts,
                               const std::vector<int64_t>& input_counts, const AllToAllOptions&,
                               const OpContext& ctx) {
  if (output_counts.size() != static_cast<size_t>(size()) || input_counts.size() != static_cast<size_t>(size())) {
    throw InvalidArgument(ctx.description + ": all_to_all needs one count per rank (" + std::to_string(size()) +
                          "), got " + std::to_string(output_counts.size()) + " and " +
                          std::to_string(input_counts.size()));
  }
  return collective(ctx, CollectiveSpec{OpType::kAllToAll, output, input, ReduceOp::SUM, 0, output_counts, input_counts});
}

WorkPtr ShmBackend::barrier(const BarrierOptions&, const OpContext& ctx) {
  return collective(ctx, spec_of(OpType::kBarrier, no_tensor_, no_tensor_, ReduceOp::SUM, 0));
}

WorkPtr ShmBackend::transfer(OpType type, const OpContext& ctx, const Tensor& tensor, int peer, int tag) {
  auto work = std::make_shared<ShmWork>(type, ctx, engine_);
  P2PRequest r;
  r.work = work;
  r.tensor = tensor;
  r.data = static_cast<uint8_t*>(tensor.data());
  r.bytes = tensor.nbytes();
  r.dtype = tensor.dtype();
  r.peer = peer;
  r.tag = tag;
  r.is_send = type == OpType::kSend;
  r.timeout = ctx.timeout;
  watch(ctx, work);
  engine_->submit(std::move(r));
  return work;
}

WorkPtr ShmBackend::send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx) {
  return transfer(OpType::kSend, ctx, tensor, dst, opts.tag);
}

WorkPtr ShmBackend::recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx) {
  return transfer(OpType::kRecv, ctx, tensor, src, opts.tag);
}

WorkPtr ShmBackend::recv_any_source(Tensor& tensor, const P2POptions& opts, const OpContext& ctx) {
  return transfer(OpType::kRecvAnySource, ctx, tensor, -1, opts.tag);
}

}  // namespace shm
}  // namespace distcomm
