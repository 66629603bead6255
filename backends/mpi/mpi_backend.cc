#include "backends/mpi/mpi_backend.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>

#include "api/errors.h"
#include "api/plugin/plugin.h"
#include "backends/mpi/mpi_counts.h"
#include "backends/mpi/mpi_group_comm.h"
#include "backends/mpi/mpi_types.h"
#include "backends/mpi/mpi_work.h"
#include "backends/mpi/p2p_tag.h"

namespace distcomm {
namespace mpi {
namespace {

bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const char* a0 = static_cast<const char*>(a.data());
  const char* b0 = static_cast<const char*>(b.data());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

}  // namespace

MpiBackend::MpiBackend(BackendOptions options, const MpiConfig& config, Runtime& runtime, const InitWait& wait,
                       const MpiBackend* parent)
    : Backend(std::move(options)),
      runtime_(runtime),
      max_count_(config.max_count_per_call),
      agreement_check_(config.agreement_check && core_abi_minor() >= 3) {
  MPI_Comm comm = create_comm(wait, parent);
  // The store, when there is one, is the failure's board: the failure is published for the
  // peers, and a Timeout asks the stall watch where they are. Both wait at most a few
  // seconds, on the thread that found the failure.
  const StorePtr board = size() > 1 && core_abi_minor() >= 3 ? Backend::options().store : nullptr;
  failure_ = std::make_shared<GroupFailure>(rank(), board);
  name_world_ranks(*failure_, Backend::options().global_ranks);
  queue_ = runtime_.attach(
      comm, failure_, group_rank_text(rank(), size(), Backend::options().group_name, Backend::options().global_ranks));
  queue_->set_store_names_peers(board != nullptr);
  try {
    // A failure the watch records (a deadline, a disagreement the reports show, a rank that
    // left) ends the group's ops as one the queue finds does. Posted, not waited for: the
    // watch records under its failure lock, and an op's callback that aborts the group (run
    // by that round) stops the watch, which takes that lock (helper-60's review: a hang).
    failure_->on_abort([rt = &runtime_, queue = std::weak_ptr<OpQueue>(queue_)] {
      if (std::shared_ptr<OpQueue> q = queue.lock()) rt->post([q] { q->abort(); });
    });
    if (board) {
      StallWatchOptions w;
      w.rank = rank();
      w.size = size();
      w.board = board;
      watch_ = std::make_unique<StallWatch>(w, *failure_);
    }
  } catch (...) {
    // No destructor runs for a half-made backend: the runtime would serve the queue, and
    // hold its communicator, for the process's life, one more for every failed new_group
    // (helper-64's review). The core publishes the failure for the peers (GroupCreation).
    runtime_.detach(queue_, std::current_exception());
    queue_.reset();
    throw;
  }
}

MpiBackend::~MpiBackend() { shutdown(); }

Backend* MpiBackend::create_subgroup_backend(const BackendOptions* options, const std::vector<int>&) {
  // Every member decides alike: each makes its backend here, none from this one's resources.
  return options ? create_mpi_backend(*options, this) : nullptr;
}

MPI_Comm MpiBackend::create_comm(const InitWait& wait, const MpiBackend* parent) const {
  const BackendOptions& o = options();
  GroupCommSpec spec;
  spec.group_name = o.group_name;
  if (parent) {
    // The parent outlives this: new_group and split run on it.
    spec.parent_shut_down = [parent] { return parent->shut_down_.load(); };
    spec.parent_name = parent->options().group_name;
  }
  spec.world_ranks = o.global_ranks;
  if (spec.world_ranks.empty()) {
    spec.world_ranks.resize(static_cast<size_t>(o.size));
    std::iota(spec.world_ranks.begin(), spec.world_ranks.end(), 0);
  }
  spec.rank = o.rank;
  MPI_Comm comm = create_group_comm(runtime_, spec, wait);
  int rank = -1, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (rank != o.rank || size != o.size) {
    runtime_.run_setup([&] { MPI_Comm_free(&comm); });
    throw InvalidArgument("mpi backend: group '" + o.group_name + "' expects rank " + std::to_string(o.rank) +
                          " of " + std::to_string(o.size) + ", but its MPI communicator has rank " +
                          std::to_string(rank) + " of " + std::to_string(size));
  }
  return comm;
}

std::vector<OpType> MpiBackend::supported_ops() const {
  return {OpType::kAllReduce, OpType::kBroadcast, OpType::kReduce,   OpType::kAllGather,
          OpType::kGather,    OpType::kScatter,   OpType::kReduceScatter, OpType::kAllToAll,
          OpType::kBarrier,   OpType::kSend,      OpType::kRecv,     OpType::kRecvAnySource};
}

std::unique_ptr<Op> MpiBackend::make_op(Call call, OpType type, const OpContext& ctx, const Tensor& data) {
  auto op = std::make_unique<Op>();
  op->call = call;
  std::string description = ctx.description;
  if (description.empty()) {
    description = group_rank_text(rank(), size(), options().group_name, options().global_ranks) + " " +
                  op_type_name(type) + " #" + std::to_string(ctx.seq);
  }
  op->work = std::make_shared<MpiWork>(type, ctx.seq, std::move(description), runtime_);
  // A zero or negative timeout means none (the ProcessGroup always resolves one).
  op->timeout = ctx.timeout;
  if (ctx.timeout.count() > 0) op->deadline = Op::Clock::now() + ctx.timeout;
  op->max_count = max_count_;
  if (agreement_check_ && !is_p2p(call) && size() > 1) {
    op->agreement = std::make_unique<Agreement>(ctx.fingerprint, rank(), size());
  }
  if (data.defined()) {
    op->data = static_cast<char*>(data.data());
    op->count = data.numel();
    op->element_size = element_size(data.dtype());
    op->dtype = data.dtype();
    op->type = datatype_of(data.dtype());
    if (data.owns_memory()) op->keep_alive[0] = data;
  }
  return op;
}

WorkPtr MpiBackend::submit(std::unique_ptr<Op> op, const OpContext& ctx) {
  op->work->set_waiter_drives(runtime_.waiter_drives(op->bytes()));
  WorkPtr work = op->work;
  queue_->submit(std::move(op));
  if (watch_) watch_->issued(ctx.fingerprint, work, ctx.timeout);
  return work;
}

void MpiBackend::check_count(OpType type, int64_t count) const {
  const std::string problem = per_rank_count_problem(op_type_name(type), count, max_count_);
  if (!problem.empty()) throw InvalidArgument("mpi backend: " + problem);
}

void MpiBackend::check_tag(OpType type, int tag) const {
  const int max_tag = max_user_tag(runtime_.tag_upper_bound());
  if (tag < 0 || tag > max_tag) {
    throw InvalidArgument(std::string("mpi backend: ") + op_type_name(type) + " tag " + std::to_string(tag) +
                          " is outside the range 0.." + std::to_string(max_tag) + " of this MPI: its MPI_TAG_UB is " +
                          std::to_string(runtime_.tag_upper_bound()) + ", and the backend keeps the tag's low " +
                          std::to_string(kDTypeTagBits) + " bits for the dtype, so that a recv of another dtype is "
                          "refused");
  }
}

const char* MpiBackend::separate_input(Op& op, const Tensor& input, const Tensor& output) {
  op.keep_alive[1] = overlaps(input, output) ? input.clone() : input;
  return static_cast<const char*>(op.keep_alive[1].data());
}

WorkPtr MpiBackend::all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) {
  auto op = make_op(Call::kAllreduce, OpType::kAllReduce, ctx, tensor);
  op->reduce_op = op_of(opts.op, tensor.dtype());
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) {
  auto op = make_op(Call::kBcast, OpType::kBroadcast, ctx, tensor);
  op->root = opts.root;
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) {
  auto op = make_op(Call::kReduce, OpType::kReduce, ctx, tensor);
  op->reduce_op = op_of(opts.op, tensor.dtype());
  op->root = opts.root;
  op->is_root = opts.root == rank();
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::all_gather(Tensor& output, const Tensor& input, const AllGatherOptions&,
                               const OpContext& ctx) {
  check_count(OpType::kAllGather, input.numel());
  auto op = make_op(Call::kAllgather, OpType::kAllGather, ctx, output);
  op->count = input.numel();
  const char* own_block = op->data + rank() * op->count * static_cast<int64_t>(op->element_size);
  op->in_place = input.data() == own_block;
  if (!op->in_place) op->input = separate_input(*op, input, output);
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::gather(Tensor& output, const Tensor& input, const GatherOptions& opts,
                           const OpContext& ctx) {
  check_count(OpType::kGather, input.numel());
  const bool is_root = opts.root == rank();
  auto op = make_op(Call::kGather, OpType::kGather, ctx, is_root ? output : Tensor());
  op->count = input.numel();
  op->type = datatype_of(input.dtype());
  op->element_size = element_size(input.dtype());
  op->root = opts.root;
  op->in_place = is_root && input.data() == op->data + rank() * op->count * static_cast<int64_t>(op->element_size);
  if (!op->in_place) op->input = separate_input(*op, input, is_root ? output : Tensor());
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts,
                            const OpContext& ctx) {
  check_count(OpType::kScatter, output.numel());
  auto op = make_op(Call::kScatter, OpType::kScatter, ctx, output);
  op->root = opts.root;
  if (opts.root == rank()) {
    const char* own_block = static_cast<const char*>(input.data()) + rank() * op->count * static_cast<int64_t>(op->element_size);
    op->in_place = output.data() == own_block;
    op->input = separate_input(*op, input, op->in_place ? Tensor() : output);
    }
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::reduce_scatter(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts,
                                   const OpContext& ctx) {
  check_count(OpType::kReduceScatter, output.numel());
  auto op = make_op(Call::kReduceScatter, OpType::kReduceScatter, ctx, output);
  op->reduce_op = op_of(opts.op, output.dtype());
  op->input = separate_input(*op, input, output);
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::all_to_all(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_counts,
                               const std::vector<int64_t>& input_counts, const AllToAllOptions&,
                               const OpContext& ctx) {
  // MPI_Ialltoallv's counts are per peer: the totals may exceed INT_MAX, but each peer's
  // count and displacement must fit an int (mpi_counts.h).
  for (const std::string& problem :
       {alltoallv_count_problem(input_counts, "input", max_count_),
        alltoallv_count_problem(output_counts, "output", max_count_)}) {
    if (!problem.empty()) throw InvalidArgument("mpi backend: " + problem);
  }
  // Always MPI_Ialltoallv: a rank sees only its own counts, and every rank must make the
  // same call. A rank whose counts were all equal (all 0, say, a rank with nothing to send
  // or receive) made MPI_Ialltoall while the others made MPI_Ialltoallv, and its op never
  // ended.
  auto op = make_op(Call::kAlltoallv, OpType::kAllToAll, ctx, output);
  op->input = separate_input(*op, input, output);
  auto to_ints = [](const std::vector<int64_t>& counts, std::vector<int>* out, std::vector<int>* displs) {
    out->assign(counts.begin(), counts.end());
    displs->resize(counts.size());
    std::exclusive_scan(out->begin(), out->end(), displs->begin(), 0);
  };
  to_ints(input_counts, &op->send_counts, &op->send_displs);
  to_ints(output_counts, &op->recv_counts, &op->recv_displs);
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::barrier(const BarrierOptions&, const OpContext& ctx) {
  return submit(make_op(Call::kBarrier, OpType::kBarrier, ctx, Tensor()), ctx);
}

WorkPtr MpiBackend::send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx) {
  check_tag(OpType::kSend, opts.tag);
  auto op = make_op(Call::kSend, OpType::kSend, ctx, tensor);
  op->root = dst;
  op->tag = opts.tag;
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx) {
  check_tag(OpType::kRecv, opts.tag);
  auto op = make_op(Call::kRecv, OpType::kRecv, ctx, tensor);
  op->root = src;
  op->tag = opts.tag;
  return submit(std::move(op), ctx);
}

WorkPtr MpiBackend::recv_any_source(Tensor& tensor, const P2POptions& opts, const OpContext& ctx) {
  check_tag(OpType::kRecvAnySource, opts.tag);
  // Over max_count elements it is split like recv: the first slice's sender sends the rest
  // (match_messages in mpi_op.cc). Refusing it here, after the sender's slices went out,
  // left them queued for the next recv from that rank.
  auto op = make_op(Call::kRecv, OpType::kRecvAnySource, ctx, tensor);
  op->root = MPI_ANY_SOURCE;
  op->tag = opts.tag;
  return submit(std::move(op), ctx);
}

void MpiBackend::shutdown() {
  // Held while the group shuts down, so that a second caller returns only once it is shut
  // down (abort() promises failed ops); not taken in a Work callback, whose thread runs
  // the round that the first caller's detach waits for.
  const bool in_callback = Runtime::in_round();
  std::unique_lock<std::mutex> ending(ending_, std::defer_lock);
  if (!in_callback) ending.lock();
  if (shut_down_.exchange(true)) {
    // The first caller may be a Work callback, which does not take ending_: a second
    // caller on another thread waits for its end here (nothing the callback's shutdown
    // does waits for this thread). A callback never waits: it may be what the first
    // caller's detach waits for.
    if (!in_callback) {
      std::unique_lock<std::mutex> lock(ended_mu_);
      ended_cv_.wait(lock, [this] { return ended_; });
    }
    return;
  }
  struct Ended {  // however this ends
    MpiBackend* b;
    ~Ended() {
      std::lock_guard<std::mutex> lock(b->ended_mu_);
      b->ended_ = true;
      b->ended_cv_.notify_all();
    }
  } ended{this};
  if (watch_) watch_->stop();
  // PeerFailure, as gloo and shm say it: code that catches it to recover sees one type.
  runtime_.detach(queue_, std::make_exception_ptr(PeerFailure(
                              "mpi backend: group '" + options().group_name +
                              "' was shut down (ProcessGroup::abort or destruction) before this op finished")));
}

}  // namespace mpi
}  // namespace distcomm
