// HierarchicalBackend: a CPU group over several hosts, several ranks per host, run as two
// levels: shared memory within each host, gloo across hosts (backend "hier", and what
// "auto" picks there, auto_backend.h).
//
// all_reduce, where the bytes are, runs by hosts. With the same number of ranks L on every
// host: a reduce_scatter within the host (shm) leaves each local rank 1/L of the host's sum;
// each local rank all_reduces its share with the ranks of its local rank on the other
// hosts (gloo, the L groups at once, so every local rank's core and connection works); an
// all_gather within the host puts the shares together. Across hosts every byte travels once
// per host, not once per rank: a flat ring's cross-host traffic shrinks by about L. Hosts
// with different numbers of ranks: a reduce to local rank 0, an all_reduce among the hosts'
// local ranks 0, a broadcast within the host.
//
// Every other op runs flat on the group's gloo backend, which gains nothing by hosts
// (all_to_all, p2p) or has not been given a hierarchy yet (broadcast, reduce, all_gather,
// reduce_scatter, barrier: each could be, as all_reduce is). The flat backend is also the
// group's fault handling (its connection watch and failure key) as on any gloo group.
//
// The hierarchical ops run in issue order on a thread of their own, one at a time, so
// that every rank issues the inner groups' ops in the same order; the Work the caller holds
// ends when the last step has. all_reduces below 64 KiB run flat: there the levels' three
// rounds and the check cost more than the bytes they save. Ops run flat may end before an
// earlier hierarchical all_reduce (each Work ends when its op has; issue order is kept for
// matching, not for completion).
//
// Failures: see ARCHITECTURE.md ("hier"): each all_reduce is also checked by the flat
// backend, whose verdict comes first; a level's failure is recorded as the group's on the
// flat backend's board, its culprit in the group's ranks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "api/diagnostics/group_failure.h"
#include "api/plugin/backend.h"
#include "api/process_group.h"

namespace distcomm {

class HierarchicalBackend : public Backend {
 public:
  // flat: the group's own gloo backend; within: this rank's host's group (shm); across:
  // the group of this rank's local rank over the hosts (gloo; null or size 1 when no other
  // host has that local rank). even: every host has the same number of ranks.
  HierarchicalBackend(std::unique_ptr<Backend> flat, ProcessGroupPtr within, ProcessGroupPtr across, bool even);
  ~HierarchicalBackend() override;

  std::string name() const override { return "hier"; }
  std::vector<OpType> supported_ops() const override { return flat_->supported_ops(); }
  // AVG and PREMUL_SUM are the ProcessGroup's (a sum, then scaled on the host): the levels
  // reduce with the flat backend's own ops only.
  bool reduces_natively(ReduceOp op, DType dtype) const override;

  WorkPtr all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) override;

  // The rest: the flat backend's.
  WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) override;
  WorkPtr reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) override;
  WorkPtr all_gather(Tensor& output, const Tensor& input, const AllGatherOptions& opts, const OpContext& ctx) override;
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
  WorkPtr batch_p2p(std::vector<P2POp>& ops, const P2POptions& opts, const OpContext& ctx) override;
  Backend* create_subgroup_backend(const BackendOptions* options, const std::vector<int>& members) override;

  // Fail what is queued, cut the levels and the flat backend off (nothing waits on a peer),
  // then stop the thread.
  void shutdown() override;
  void abort() override;

 private:
  using Clock = std::chrono::steady_clock;
  // Whether the thread has begun a job, or its failed check has ended it first.
  struct JobState {
    std::mutex mu;
    bool started = false;
    bool skipped = false;
  };
  struct Job {
    Tensor tensor;
    ReduceOp op;
    Clock::time_point deadline;  // the op's timeout, counted from its issue
    WorkPtr work;
    Tensor probe;   // the check's one element
    WorkPtr check;  // the flat backend's check of the op (all_reduce)
    std::shared_ptr<JobState> state;
  };
  // What the thread shares with the object: the thread holds it too, so that a group
  // destroyed from its own thread (a Work's callback dropping the last reference) leaves
  // the thread something to read while it returns.
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Job> jobs;
    bool stopping = false;
  };
  void serve(const std::shared_ptr<Queue>& queue);
  void run(Job& job);
  // A Work already ended with the group's failure, once the hierarchy recorded one (the
  // flat backend, cut off then, would only say it was shut down); null while usable.
  WorkPtr refused(OpType op, const OpContext& ctx) const;
  void stop(bool abort);
  // Aborts the groups within and across hosts (once): what runs in them fails now.
  void abort_levels();
  // An op whose levels failed while its check passed (a rank died mid-op): the group's
  // failure, recorded on the flat backend's board, so that every rank's flat backend names
  // it, then the flat backend and the levels are cut off. Another rank's record, when one
  // is there (this rank's failure is then its consequence), else this rank's, worded in
  // this group's ranks ("rank 3 died or closed its connection, seen by the group's level
  // 'world/hier_local1', where it is rank 1: ..."). Returns what the op ends with.
  std::exception_ptr fail_group(std::exception_ptr error, const Work& op);
  // The culprit of a level's failure, in this group's ranks (-1 when unknown); level_rank:
  // the same rank in the level's; shut_down: whether the level blames it for shutting down.
  int culprit_of(const ProcessGroupPtr& level, int* level_rank, bool* shut_down) const;
  // A tensor of count elements over `kept`'s memory (grown when too small): the all_reduce's
  // share and padding, reused from op to op (only the thread runs ops, one at a time).
  static Tensor scratch(Tensor& kept, int64_t count, DType dtype);

  std::unique_ptr<Backend> flat_;
  ProcessGroupPtr within_;
  ProcessGroupPtr across_;
  const bool even_;

  // The flat backend's first failure, as its GroupFailure told failure_ (a death its
  // connection watch saw, on a rank whose levels do not reach the dead rank): the levels
  // are aborted at once, and the op in flight ends with it. Before failure_: outlives it.
  std::mutex flat_failure_mu_;
  std::exception_ptr flat_failure_;
  int flat_culprit_ = -1;
  GroupFailure failure_;  // over the flat backend's board
  Tensor share_;   // scratch() memory, the thread's only
  Tensor padded_;

  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::atomic<bool> levels_aborted_{false};
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace distcomm
