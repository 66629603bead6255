// MpiBackend: one distcomm group over one MPI communicator.
//
// The world group gets a duplicate of MPI_COMM_WORLD (the program's own MPI traffic on
// MPI_COMM_WORLD cannot mix with distcomm's); a subgroup gets MPI_Comm_create_group over
// its ranks, a call that involves only the group's members, as ProcessGroup::new_group
// requires. Both are made within the group's creation deadline, after every member has
// arrived (mpi_group_comm.h). Each op becomes an mpi::Op on the group's queue, which the process's MPI
// thread runs (mpi_runtime.h); the op returns its Work at once.
//
// Ranks that disagree: a collective runs its agreement check first (mpi_agreement.h), a
// recv checks the size of its message before it lands (mpi_op.h). When the group has a
// store the ranks share (InitOptions::store, or an init_method other than env://), a
// stall watch (api/diagnostics/stall_watch.h) names, in a Timeout, the ranks that have not reached the
// op, and the group's failure is published there for the peers.
//
// Configuration: mpi_config.h (the plugin parses it once per group).
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/plugin/backend.h"
#include "api/group/init_wait.h"
#include "api/diagnostics/stall_watch.h"
#include "backends/mpi/mpi_config.h"
#include "backends/mpi/mpi_op.h"
#include "backends/mpi/mpi_runtime.h"
#include "backends/mpi/op_queue.h"

namespace distcomm {
namespace mpi {

class MpiBackend : public Backend {
 public:
  // Collective over the group's ranks, within wait's deadline (Timeout naming the ranks
  // that did not come). Throws InvalidArgument when the options' rank and size disagree
  // with MPI's view of the job.
  // parent: the group's parent's backend, for a subgroup made through
  // create_subgroup_backend (its arrival wait ends when the parent is shut down).
  MpiBackend(BackendOptions options, const MpiConfig& config, Runtime& runtime, const InitWait& wait,
             const MpiBackend* parent = nullptr);
  ~MpiBackend() override;

  std::string name() const override { return "mpi"; }
  std::vector<OpType> supported_ops() const override;

  WorkPtr all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) override;
  WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) override;
  WorkPtr reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) override;
  WorkPtr all_gather(Tensor& output, const Tensor& input, const AllGatherOptions& opts,
                     const OpContext& ctx) override;
  WorkPtr gather(Tensor& output, const Tensor& input, const GatherOptions& opts,
                 const OpContext& ctx) override;
  WorkPtr scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts,
                  const OpContext& ctx) override;
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
  // Made as the plugin's create() makes one (create_mpi_backend), but knowing this group as
  // its parent: without a store, nothing else tells the subgroup's creation that the
  // parent was aborted meanwhile (by another thread of this rank).
  Backend* create_subgroup_backend(const BackendOptions* options, const std::vector<int>& members) override;

 private:
  MPI_Comm create_comm(const InitWait& wait, const MpiBackend* parent) const;
  // An op on `data` (dtype, count) with its Work and deadline filled in.
  std::unique_ptr<Op> make_op(Call call, OpType type, const OpContext& ctx, const Tensor& data);
  WorkPtr submit(std::unique_ptr<Op> op, const OpContext& ctx);
  // MPI counts are int: refuses (before anything is sent) a count that cannot be split.
  void check_count(OpType type, int64_t count) const;
  void check_tag(OpType type, int tag) const;
  // The input of a gather-like op, kept alive by the op: a copy when it overlaps `output`
  // (MPI forbids aliased buffers; the exact in-place layouts use MPI_IN_PLACE instead).
  const char* separate_input(Op& op, const Tensor& input, const Tensor& output);

  Runtime& runtime_;
  int64_t max_count_ = INT_MAX;
  bool agreement_check_ = true;
  std::shared_ptr<GroupFailure> failure_;
  // Set once made, never reset: a thread may submit while another shuts the group down
  // (the queue then refuses the op through the group's failure).
  std::shared_ptr<OpQueue> queue_;
  // shutdown() runs once: abort() may come from two threads at once (a watchdog's and the
  // program's), and again from the destructor. ending_: see shutdown().
  std::atomic<bool> shut_down_{false};
  std::mutex ending_;
  // Set once the first shutdown() has ended (under ended_mu_): what a later caller off the
  // callback thread waits for when the first ran in a Work callback, without ending_.
  std::mutex ended_mu_;
  std::condition_variable ended_cv_;
  bool ended_ = false;
  std::unique_ptr<StallWatch> watch_;  // with a store, groups of more than one rank
};

// What the plugin's create() does (mpi_plugin.cc): checks the launch and the options, starts
// MPI, makes the backend; parent as MpiBackend's.
Backend* create_mpi_backend(const BackendOptions& options, const MpiBackend* parent);

}  // namespace mpi
}  // namespace distcomm
