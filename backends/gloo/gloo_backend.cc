#include "backends/gloo/gloo_backend.h"

#include <algorithm>

#include <gloo/types.h>

#include "api/errors.h"
#include "api/diagnostics/launcher_stops.h"
#include "api/group/init_wait.h"
#include "api/plugin/plugin.h"
#include "backends/gloo/gloo_errors.h"
#include "backends/gloo/gloo_slots.h"

namespace distcomm {
namespace gloo {
namespace {

// The tag and the tensor's size: a send and a recv of different sizes or dtypes never
// meet (gloo_slots.h); the stall watch names both counts.
uint64_t p2p_slot(int tag, const Tensor& t) {
  return sized_slot(kPointToPointSlotPrefix, static_cast<uint32_t>(tag), t.nbytes(), t.dtype());
}

// How much later than the op's deadline gloo's own wait ends where the stall watch enforces
// the deadline: enough for the watch to wake (200 ms after the deadline), explain the
// Timeout (about a tick of the others' watches) and store it.
constexpr std::chrono::milliseconds kGlooBackstop{5000};

std::vector<int> other_ranks(int rank, int size) {
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) {
    if (r != rank) ranks.push_back(r);
  }
  return ranks;
}

}  // namespace

GlooBackend::GlooBackend(BackendOptions options)
    : Backend(std::move(options)),
      // Parsed before the rendezvous: a bad value fails at once, not after connecting.
      config_(GlooConfig::parse(Backend::options().config)) {
  comm_ = std::make_unique<GlooComm>(Backend::options(), config_);
  failure_ = std::make_unique<GroupFailure>(rank(), Backend::options().store);
  name_world_ranks(*failure_, Backend::options().global_ranks);
  failure_->on_abort([this] {
    // Said before the connections are cut, so that the peers take this rank's end for a
    // consequence, and name the rank that went without a word.
    if (ConnectionWatch* connections = comm_->connections()) connections->say_failed();
    comm_->interrupt(failure_->refusal());
    transfers_->abort_all();
  });
  transfers_ = std::make_unique<TransferWaiters>(*failure_, comm_->connections());
  CollectiveEnv env;
  env.context = comm_->context();
  env.connections = comm_->connections();
  env.algorithm = config_.algorithm;
  try {
    // In the try: a worker that cannot start (ulimit -u) is a creation failure said before
    // the connections close, as any below.
    worker_ = CollectiveWorker::start(std::move(env), *failure_, config_.worker_sched);
    if (Backend::options().store && size() > 1 && core_abi_minor() >= 3) {
      StallWatchOptions w;
      w.rank = rank();
      w.size = size();
      w.board = Backend::options().store;
      watch_ = std::make_unique<StallWatch>(w, *failure_);  // throws on a bad DISTCOMM_STALL_REPORT_SECONDS
    }
    if (ConnectionWatch* connections = comm_->connections()) {
      connections->start([this](const std::vector<LostPeer>& lost) { peers_lost(lost); });
    }
  } catch (...) {
    // Said before the connections close (the worker's stop and the members' destructors):
    // a peer still completing its side of the rendezvous sees them close and must find this
    // failure, the cause, not report a connection closed by this rank (gloo_rendezvous.cc).
    if (Backend::options().store && size() > 1) {
      InitWait::for_backend(Backend::options().config, Backend::options().timeout, "", Backend::options().global_ranks,
                            Backend::options().store.get())
          .say_creation_failed(rank(), std::current_exception());
    }
    // No destructor runs for a half-made backend, and the worker holds itself until
    // stopped: stopped here, or its thread would keep the context and its sockets for ever.
    if (worker_) worker_->stop();
    throw;
  }
}

void GlooBackend::peers_lost(const std::vector<LostPeer>& peers) {
  std::vector<int> ranks;
  for (const LostPeer& p : peers) ranks.push_back(p.rank);
  // The group cannot go on without them. Recorded as the failure of the op in flight, if
  // any, which then ends with this error rather than the group's refusal (its wait may be
  // one gloo does not end: a message from the dead peer under way).
  // A loss: when this rank is already recording a failure, that came first (the peer may
  // have exited because of it).
  WorkPtr op = worker_->running();
  int transfer_peer = -1;
  if (!op) op = transfers_->in_flight(&transfer_peer);
  // The op in flight is a transfer with one peer, not the rank that left cleanly: that
  // departure had no part in it (its waits are on its peer's connection), so the lost
  // peers are said as lost on their own, not as having gone because of it.
  std::vector<LostPeer> told = peers;
  const int before = departure_behind(peers);
  if (op && transfer_peer >= 0 && before >= 0 && transfer_peer != before) {
    for (LostPeer& p : told) p.after_departure_of = -1;
  }
  // A failed rank's machine-mates, stopped by their launcher because of it, go with it:
  // named apart, not as culprits (launcher_stops). Asked only of what this loss holds.
  const LauncherStops split = launcher_stops(*failure_, ranks);
  if (!split.stopped.empty()) {
    std::vector<LostPeer> others;
    for (const LostPeer& p : told) {
      if (std::find(split.stopped.begin(), split.stopped.end(), p.rank) == split.stopped.end()) others.push_back(p);
    }
    const std::exception_ptr error = std::make_exception_ptr(
        PeerFailure(with_launcher_stopped_text(others.empty() ? "" : gloo::peers_lost(others).what(), split)));
    // Where every rank this loss holds was stopped (a subgroup without the failed rank),
    // the loss is still a consequence: the failed rank's published error is adopted where
    // there is one, else a stopped rank stands as its cause, as before the marks.
    const int departed = departure_behind(others.empty() ? told : others);
    failure_->record_loss(error, op.get(),
                          departed >= 0                ? departed
                          : split.others.empty() ? ranks.front()
                                                 : culprit_among(split.others));
    return;
  }
  const std::exception_ptr error = std::make_exception_ptr(gloo::peers_lost(told));
  const int departed = departure_behind(told);
  failure_->record_loss(error, op.get(), departed >= 0 ? departed : culprit_among(ranks));
}

GlooBackend::~GlooBackend() { shutdown(); }

std::chrono::milliseconds GlooBackend::gloo_wait_limit(std::chrono::milliseconds timeout) const {
  if (!watch_ || timeout > std::chrono::milliseconds::max() - kGlooBackstop) return timeout;
  return timeout + kGlooBackstop;
}

std::vector<OpType> GlooBackend::supported_ops() const {
  return {OpType::kAllReduce, OpType::kBroadcast, OpType::kReduce,   OpType::kAllGather,
          OpType::kGather,    OpType::kScatter,   OpType::kReduceScatter, OpType::kAllToAll,
          OpType::kBarrier,   OpType::kSend,      OpType::kRecv,     OpType::kRecvAnySource};
}

WorkPtr GlooBackend::enqueue(OpType type, const OpContext& ctx, const Tensor& out, const Tensor& in, int root,
                             ReduceOp reduce, std::vector<int64_t> out_counts, std::vector<int64_t> in_counts) {
  GlooOp op;
  op.type = type;
  op.out = out;
  op.in = in;
  op.root = root;
  op.reduce = reduce;
  op.out_counts = std::move(out_counts);
  op.in_counts = std::move(in_counts);
  op.tag = collective_tag(ctx);
  op.timeout = ctx.timeout;
  op.wait_limit = gloo_wait_limit(ctx.timeout);
  WorkPtr work = worker_->submit(std::move(op), ctx);  // after a failure the worker refuses it, in order
  if (watch_) watch_->issued(ctx.fingerprint, work, ctx.timeout);
  return work;
}

WorkPtr GlooBackend::all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) {
  return enqueue(OpType::kAllReduce, ctx, tensor, Tensor(), 0, opts.op);
}

WorkPtr GlooBackend::broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) {
  return enqueue(OpType::kBroadcast, ctx, tensor, Tensor(), opts.root);
}

WorkPtr GlooBackend::reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) {
  return enqueue(OpType::kReduce, ctx, tensor, Tensor(), opts.root, opts.op);
}

WorkPtr GlooBackend::all_gather(Tensor& output, const Tensor& input, const AllGatherOptions&, const OpContext& ctx) {
  return enqueue(OpType::kAllGather, ctx, output, input);
}

WorkPtr GlooBackend::gather(Tensor& output, const Tensor& input, const GatherOptions& opts, const OpContext& ctx) {
  return enqueue(OpType::kGather, ctx, output, input, opts.root);
}

WorkPtr GlooBackend::scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts, const OpContext& ctx) {
  return enqueue(OpType::kScatter, ctx, output, input, opts.root);
}

WorkPtr GlooBackend::reduce_scatter(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts,
                                    const OpContext& ctx) {
  return enqueue(OpType::kReduceScatter, ctx, output, input, 0, opts.op);
}

WorkPtr GlooBackend::all_to_all(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_counts,
                                const std::vector<int64_t>& input_counts, const AllToAllOptions&,
                                const OpContext& ctx) {
  // gloo copies this rank's own block locally and requires both sides to agree on it;
  // catch a mismatch here rather than as a gloo assertion on the worker.
  const auto me = static_cast<size_t>(rank());
  if (output_counts.size() != static_cast<size_t>(size()) || input_counts.size() != static_cast<size_t>(size()) ||
      output_counts[me] != input_counts[me]) {
    throw InvalidArgument(ctx.description + ": this rank sends itself " +
                          (input_counts.size() > me ? std::to_string(input_counts[me]) : std::string("?")) +
                          " elements but expects " +
                          (output_counts.size() > me ? std::to_string(output_counts[me]) : std::string("?")) +
                          " from itself; the two splits must agree on this rank's own block");
  }
  return enqueue(OpType::kAllToAll, ctx, output, input, 0, ReduceOp::SUM, output_counts, input_counts);
}

WorkPtr GlooBackend::barrier(const BarrierOptions&, const OpContext& ctx) { return enqueue(OpType::kBarrier, ctx); }

template <typename Post>
WorkPtr GlooBackend::post_transfer(OpType type, const Tensor& tensor, bool is_send, int peer, const OpContext& ctx,
                                   Post&& post) {
  auto work = std::make_shared<Work>(type, ctx.seq, ctx.description);
  if (failure_->failed()) {
    work->finish(failure_->refusal());
    return work;
  }
  auto transfer = std::make_unique<Transfer>();
  transfer->buffer = comm_->context()->createUnboundBuffer(tensor.data(), tensor.nbytes());
  transfer->work = work;
  transfer->tensor = tensor;
  transfer->is_send = is_send;
  transfer->peer = peer;
  transfer->timeout = ctx.timeout;
  transfer->wait_limit = gloo_wait_limit(ctx.timeout);
  try {
    post(*transfer->buffer);
  } catch (...) {
    // A closed connection shows when posting; it is the group's failure like any other.
    work->finish(
        record_op_failure(*failure_, comm_->connections(), std::current_exception(), ctx.timeout, *work, peer));
    return work;
  }
  transfers_->add(std::move(transfer));
  if (watch_) watch_->issued(ctx.fingerprint, work, ctx.timeout);
  return work;
}

WorkPtr GlooBackend::send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx) {
  return post_transfer(OpType::kSend, tensor, true, dst, ctx, [&](::gloo::transport::UnboundBuffer& b) {
    b.send(dst, p2p_slot(opts.tag, tensor), 0, tensor.nbytes());
  });
}

WorkPtr GlooBackend::recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx) {
  return post_transfer(OpType::kRecv, tensor, false, src, ctx, [&](::gloo::transport::UnboundBuffer& b) {
    b.recv(src, p2p_slot(opts.tag, tensor), 0, tensor.nbytes());
  });
}

WorkPtr GlooBackend::recv_any_source(Tensor& tensor, const P2POptions& opts, const OpContext& ctx) {
  return post_transfer(OpType::kRecvAnySource, tensor, false, -1, ctx, [&](::gloo::transport::UnboundBuffer& b) {
    b.recv(other_ranks(rank(), size()), p2p_slot(opts.tag, tensor), 0, tensor.nbytes());
  });
}

void GlooBackend::shutdown() {
  if (shut_down_.exchange(true)) return;
  // Marked first, then asked: an op either sees the mark and is refused, or is seen busy
  // here and gets interrupted (CollectiveWorker::loop decides under the lock busy() takes).
  // Clean when the group had not failed and no op was in flight: then the peers are told
  // (a goodbye on each connection) that the ends of this rank's connections are no death.
  bool asked = false, in_flight = false;
  failure_->shut_down(std::make_exception_ptr(PeerFailure(
                          "the group was shut down on this rank (ProcessGroup::abort or destruction)")),
                      [&] {
                        asked = true;
                        in_flight = worker_->busy() || transfers_->busy();
                        return in_flight;
                      });
  worker_->stop();
  transfers_->stop();
  if (ConnectionWatch* connections = comm_->connections()) {
    connections->stop();  // before what its reports use goes
    if (asked && !in_flight) connections->say_goodbye();
  }
  if (watch_) watch_->stop();  // after the ops: a Timeout they end with may ask it
}

}  // namespace gloo
}  // namespace distcomm
