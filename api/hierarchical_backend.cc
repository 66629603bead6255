#include "api/hierarchical_backend.h"

#include <pthread.h>

#include "api/errors.h"

namespace distcomm {

HierarchicalBackend::HierarchicalBackend(std::unique_ptr<Backend> flat, ProcessGroupPtr within, ProcessGroupPtr across,
                                         bool even)
    : Backend(flat->options()),
      flat_(std::move(flat)),
      within_(std::move(within)),
      across_(std::move(across)),
      even_(even),
      thread_([this] { serve(); }) {}

HierarchicalBackend::~HierarchicalBackend() {
  shutdown();
  if (thread_.joinable()) thread_.detach();  // only when stopped from its own thread, which is ending
}

bool HierarchicalBackend::reduces_natively(ReduceOp op, DType dtype) const {
  if (op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM) return false;
  return flat_->reduces_natively(op, dtype);
}

WorkPtr HierarchicalBackend::all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) {
  auto work = std::make_shared<Work>(OpType::kAllReduce, ctx.seq, ctx.description);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw PeerFailure(ctx.description + ": the group has been shut down");
    queue_.push_back(Job{tensor, opts.op, ctx.timeout, work});
  }
  cv_.notify_one();
  return work;
}

void HierarchicalBackend::serve() {
  pthread_setname_np(pthread_self(), "dc-hier");
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      run(job);
      job.work->finish();
    } catch (...) {
      job.work->finish(std::current_exception());
    }
  }
}

void HierarchicalBackend::run(Job& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw PeerFailure("the group was shut down before this all_reduce ran");
  }
  const bool across = across_ && across_->size() > 1;
  AllReduceOptions all;
  all.op = job.op;
  all.timeout = job.timeout;
  const int64_t n = job.tensor.numel();
  Tensor flat = job.tensor.reshape({n});
  if (!even_) {
    // Hosts of different sizes share no partition of the tensor: through local rank 0.
    ReduceOptions to_leader;
    to_leader.op = job.op;
    to_leader.root = 0;
    to_leader.timeout = job.timeout;
    within_->reduce(flat, to_leader)->wait();
    if (within_->rank() == 0 && across) across_->all_reduce(flat, all)->wait();
    BroadcastOptions from_leader;
    from_leader.root = 0;
    from_leader.timeout = job.timeout;
    within_->broadcast(flat, from_leader)->wait();
    return;
  }
  const int local = within_->size();
  if (local == 1) {
    if (across) across_->all_reduce(flat, all)->wait();
    return;
  }
  // Each local rank's share of the host's sum: blocks of ceil(n / local) elements, the tail
  // padded when local does not divide n (padding is reduced with the rest and dropped).
  const int64_t block = (n + local - 1) / local;
  const bool padded = block * local != n;
  Tensor whole = flat;
  if (padded) {
    whole = Tensor::zeros({block * local}, flat.dtype());
    whole.flat_slice(0, n).copy_from(flat);
  }
  Tensor share = Tensor::empty({block}, flat.dtype());
  ReduceScatterOptions scatter;
  scatter.op = job.op;
  scatter.timeout = job.timeout;
  within_->reduce_scatter_tensor(share, whole, scatter)->wait();
  if (across) across_->all_reduce(share, all)->wait();
  AllGatherOptions gather;
  gather.timeout = job.timeout;
  within_->all_gather_into_tensor(whole, share, gather)->wait();
  if (padded) flat.copy_from(whole.flat_slice(0, n));
}

WorkPtr HierarchicalBackend::broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) {
  return flat_->broadcast(tensor, opts, ctx);
}
WorkPtr HierarchicalBackend::reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) {
  return flat_->reduce(tensor, opts, ctx);
}
WorkPtr HierarchicalBackend::all_gather(Tensor& output, const Tensor& input, const AllGatherOptions& opts,
                                        const OpContext& ctx) {
  return flat_->all_gather(output, input, opts, ctx);
}
WorkPtr HierarchicalBackend::gather(Tensor& output, const Tensor& input, const GatherOptions& opts,
                                    const OpContext& ctx) {
  return flat_->gather(output, input, opts, ctx);
}
WorkPtr HierarchicalBackend::scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts,
                                     const OpContext& ctx) {
  return flat_->scatter(output, input, opts, ctx);
}
WorkPtr HierarchicalBackend::reduce_scatter(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts,
                                            const OpContext& ctx) {
  return flat_->reduce_scatter(output, input, opts, ctx);
}
WorkPtr HierarchicalBackend::all_to_all(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_counts,
                                        const std::vector<int64_t>& input_counts, const AllToAllOptions& opts,
                                        const OpContext& ctx) {
  return flat_->all_to_all(output, input, output_counts, input_counts, opts, ctx);
}
WorkPtr HierarchicalBackend::barrier(const BarrierOptions& opts, const OpContext& ctx) {
  return flat_->barrier(opts, ctx);
}
WorkPtr HierarchicalBackend::send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx) {
  return flat_->send(tensor, dst, opts, ctx);
}
WorkPtr HierarchicalBackend::recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx) {
  return flat_->recv(tensor, src, opts, ctx);
}
WorkPtr HierarchicalBackend::recv_any_source(Tensor& tensor, const P2POptions& opts, const OpContext& ctx) {
  return flat_->recv_any_source(tensor, opts, ctx);
}
WorkPtr HierarchicalBackend::batch_p2p(std::vector<P2POp>& ops, const P2POptions& opts, const OpContext& ctx) {
  return flat_->batch_p2p(ops, opts, ctx);
}
Backend* HierarchicalBackend::create_subgroup_backend(const BackendOptions* options, const std::vector<int>& members) {
  return flat_->create_subgroup_backend(options, members);
}

void HierarchicalBackend::stop(bool abort) {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;  // shutdown and abort are idempotent
    stopping_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (Job& job : dropped) {
    job.work->finish(std::make_exception_ptr(PeerFailure("the group was shut down before this all_reduce ran")));
  }
  // An all_reduce still running waits on its inner groups: aborting them ends it now (a
  // clean destroy comes after the program's waits, so there is none then), never after
  // the op's timeout.
  within_->abort();
  if (across_) across_->abort();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  if (abort) {
    flat_->abort();
  } else {
    flat_->shutdown();
  }
}

void HierarchicalBackend::shutdown() { stop(false); }
void HierarchicalBackend::abort() { stop(true); }

}  // namespace distcomm
