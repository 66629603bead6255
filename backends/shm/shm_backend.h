// ShmBackend: CPU collectives and point-to-point between the processes of one host,
// through shared memory (no socket on the data path).
//
// Written as a third party would write a plugin: against api/ headers only. Each group
// maps one segment per rank (shm_segment.h, shm_rendezvous.h); its ops run on the
// group's engine (shm_engine.h): collectives as rounds over fixed-size staging slots
// (shm_rounds.h, shm_collective.h), send/recv through per-pair rings (shm_p2p.h). The
// thread that waits on a Work makes the progress; a progress thread covers ops nobody
// waits on. A peer that dies, times out or shuts the group down fails the waiting ops with
// its reason and rank (shm_failure.h); the group is then unusable and later ops fail at once.
// Ranks that disagree on a collective never exchange data (each round carries its op's
// agreement hash, shm_rounds.h) and fail with a Desync that tables what each rank runs
// (shm_op_line.h). The group's stall watch (api/diagnostics/stall_watch.h), as gloo's, names the ranks
// an op waits for in a Timeout and follows a failure another rank published.
//
// Settings: the shm_* config keys (shm_config.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/plugin/backend.h"
#include "api/diagnostics/stall_watch.h"
#include "backends/shm/shm_config.h"
#include "backends/shm/shm_engine.h"

namespace distcomm {
namespace shm {

class ShmBackend final : public Backend {
 public:
  // Runs the group's rendezvous (every rank of the group constructs one).
  explicit ShmBackend(BackendOptions options);
  ~ShmBackend() override;

  std::string name() const override { return "shm"; }
  std::vector<OpType> supported_ops() const override;
  // AVG natively (each reduced element is divided once, by the rank that reduces it),
  // except of float16/bfloat16, which the ProcessGroup scales first (avg_scales_inputs);
  // PREMUL_SUM through the ProcessGroup's scaling.
  bool reduces_natively(ReduceOp op, DType dtype) const override;

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
  // A spec of these arguments (no counts), valid while they are.
  CollectiveSpec spec_of(OpType type, const Tensor& out, const Tensor& in, ReduceOp op, int root) const;
  WorkPtr collective(const OpContext& ctx, const CollectiveSpec& spec);
  WorkPtr transfer(OpType type, const OpContext& ctx, const Tensor& tensor, int peer, int tag);
  void watch(const OpContext& ctx, const WorkPtr& work);

  const ShmConfig config_;
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<StallWatch> watch_;  // groups of more than one rank; holds engine_'s GroupFailure
  GroupShape shape_;
  // What a spec's absent tensor and counts refer to (members, so that they live as long as
  // any call that builds a spec).
  const Tensor no_tensor_;
  const std::vector<int64_t> no_counts_;
};

}  // namespace shm
}  // namespace distcomm
