// GlooBackend: distcomm's CPU backend over Gloo's TCP transport (libgloo 0.5).
//
// Collectives are queued to one worker thread per group and run in issue order
// (gloo_worker.h); send/recv are posted at once and completed by waiter threads
// (gloo_p2p.h). Every op waits at most its OpContext timeout, counted from its issue, then
// fails with Timeout; a lost connection is PeerFailure. The stall watch enforces the
// timeout where the group has one (always, beyond one rank): gloo itself closes every
// connection of the group the moment one of its waits times out, before the Timeout could
// be published, and a peer cut off that way would report "connection closed" rather than
// the timeout. gloo's own per-op timeout, a few seconds later, is the backstop. After
// either, the group is unusable: later ops fail at once with the first error, and peers
// are told and cut loose (api/diagnostics/group_failure.h; gloo's errors in distcomm's terms:
// gloo_errors.h), and every wait on its connections ends, also the ones gloo itself would
// leave to their timeout (gloo_interruptible_context.h). A peer whose connection closes
// without a goodbye (its process died or exited without closing the group) fails the group
// at once on every rank, naming it, whatever each is doing (gloo_connection_watch.h).
//
// Ranks that disagree on an op never exchange a byte: collectives' tags and point-to-point
// slots carry the op's fingerprint and size (gloo_slots.h), so the op waits, and the stall
// watch (api/diagnostics/stall_watch.h) turns the wait into Desync, or InvalidArgument naming both
// sizes of a send and its recv, within seconds.
//
// Config keys: gloo_config.h.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "api/plugin/backend.h"
#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/stall_watch.h"
#include "backends/gloo/gloo_all_reduce.h"
#include "backends/gloo/gloo_comm.h"
#include "backends/gloo/gloo_config.h"
#include "backends/gloo/gloo_op.h"
#include "backends/gloo/gloo_p2p.h"
#include "backends/gloo/gloo_worker.h"

namespace distcomm {
namespace gloo {

class GlooBackend final : public Backend {
 public:
  // Runs the group's rendezvous (every rank of the group constructs one).
  explicit GlooBackend(BackendOptions options);
  ~GlooBackend() override;

  std::string name() const override { return "gloo"; }
  std::vector<OpType> supported_ops() const override;

  WorkPtr all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) override;
  WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) override;
  WorkPtr reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) override;
  WorkPtr all_gather(Tensor& output, const Tensor& input, const AllGatherOptions& opts,
                     const OpContext& ctx) override;
  WorkPtr gather(Tensor& output, const Tensor& input, const GatherOptions& opts, const OpContext& ctx) override;
  WorkPtr scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts, const OpContext& ctx) override;
  WorkPtr reduce_scatter(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts,
                         const OpContext& ctx) override;
  WorkPtr all_to_all(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_counts,
                     const std::vector<int64_t>& input_counts, const AllToAllOptions& opts,
                     const OpContext& ctx) override;
  WorkPtr barrier(const BarrierOptions& opts, const OpContext& ctx) override;
  WorkPtr send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx) override;
  WorkPtr recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx) override;
  WorkPtr recv_any_source(Tensor& tensor, const P2POptions& opts, const OpContext& ctx) override;

  void shutdown() override;

 private:
  // Queues a collective: what it writes (out) and reads (in), its root, its reduction,
  // and all_to_all's element counts per rank.
  WorkPtr enqueue(OpType type, const OpContext& ctx, const Tensor& out = Tensor(), const Tensor& in = Tensor(),
                  int root = 0, ReduceOp reduce = ReduceOp::SUM, std::vector<int64_t> out_counts = {},
                  std::vector<int64_t> in_counts = {});
  // Posts one transfer with `peer` (-1: any source); `post` calls send/recv on the buffer.
  template <typename Post>
  WorkPtr post_transfer(OpType type, const Tensor& tensor, bool is_send, int peer, const OpContext& ctx, Post&& post);

  // How long gloo's waits of an op with this timeout may take (see the top of this file).
  std::chrono::milliseconds gloo_wait_limit(std::chrono::milliseconds timeout) const;
  // The connection watch found peers that closed their connections without closing the
  // group (their processes died or exited): the group's failure.
  void peers_lost(const std::vector<LostPeer>& peers);

  const GlooConfig config_;  // parsed once, in the constructor
  std::unique_ptr<GlooComm> comm_;
  std::unique_ptr<GroupFailure> failure_;
  std::unique_ptr<TransferWaiters> transfers_;
  std::shared_ptr<CollectiveWorker> worker_;  // its Works hold weak references
  std::unique_ptr<StallWatch> watch_;  // groups of more than one rank
  std::atomic<bool> shut_down_{false};
};

}  // namespace gloo
}  // namespace distcomm
