// HierarchicalBackend: a CPU group over several hosts, several ranks per host, run as two
// levels: shared memory within each host, gloo across hosts (or mpi: setting hier_across,
// auto_backend.h) (backend "hier", and what "auto" picks there).
//
// all_reduce, broadcast, reduce, all_gather and reduce_scatter, where the bytes are, run by
// hosts: shm steps within each host, and across hosts one share of the op per local rank,
// each local rank with its local rank on the other hosts (the groups across at once, so
// every local rank's core and connection works), so that a host's traffic crosses once per
// host rather than once per rank. Each op's schedule is in api/hier/hier_<op>.cc (what they
// share: api/hier/hier_schedule.h). Hosts with different numbers of ranks go through each
// host's local rank 0.
//
// Every other op runs flat on the group's backend across hosts (gloo, or mpi): all_to_all, gather, scatter and
// p2p gain nothing by hosts (their bytes go from one rank to another once either way), and
// barrier gains nothing because each hierarchical op is checked by a flat op of its own
// kind (below), for a barrier a flat barrier. The flat backend is also the group's fault
// handling (its connection watch and failure key) as on any group of that backend.
//
// The hierarchical ops run in issue order on a thread of their own, one at a time, so that
// every rank issues the inner groups' ops in the same order; the Work the caller holds ends
// when the last step has. Ops below a size (flat_below in the .cc, by measurement: 64 KiB
// to 4 MiB by op) run flat: there the levels' rounds and the check cost more than the bytes they save. Ops run
// flat may end before an earlier hierarchical one (each Work ends when its op has; issue
// order is kept for matching, not for completion).
//
// Failures: see ARCHITECTURE.md ("hier"): each hierarchical op is also issued to the flat
// backend as a one-element op of its kind under its sequence number and fingerprint,
// whose verdict comes first; a level's failure is recorded as the group's on the flat
// backend's board, its culprit in the group's ranks. An op's Work is ended by the thread;
// after a process stop (SIGSTOP, a frozen host) the core's safety net gives that thread its
// grace again (work.cc), so that the op ends with the group's failure.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "api/diagnostics/group_failure.h"
#include "api/hier/hier_schedule.h"
#include "api/plugin/backend.h"
#include "api/process_group.h"

namespace distcomm {

class HierarchicalBackend : public Backend {
 public:
  // flat: the group's own backend across hosts (gloo or mpi); within: this rank's host's
  // group (shm); across: the group of this rank's local rank over the hosts (that backend;
  // null or size 1 when no other host has that local rank); hosts: where the group's ranks sit.
  HierarchicalBackend(std::unique_ptr<Backend> flat, ProcessGroupPtr within, ProcessGroupPtr across,
                      const HostLayout& hosts);
  ~HierarchicalBackend() override;

  std::string name() const override { return "hier"; }
  std::vector<OpType> supported_ops() const override { return flat_->supported_ops(); }
  // AVG and PREMUL_SUM are the ProcessGroup's (a sum, then scaled on the host): the levels
  // reduce with the flat backend's own ops only.
  bool reduces_natively(ReduceOp op, DType dtype) const override;

  // By hosts (from flat_below's size on, in the .cc).
  WorkPtr all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) override;
  WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) override;
  WorkPtr reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) override;
  WorkPtr all_gather(Tensor& output, const Tensor& input, const AllGatherOptions& opts, const OpContext& ctx) override;
  WorkPtr reduce_scatter(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts,
                         const OpContext& ctx) override;

  // The rest: the flat backend's.
  WorkPtr gather(Tensor& output, const Tensor& input, const GatherOptions& opts, const OpContext& ctx) override;
  WorkPtr scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts, const OpContext& ctx) override;
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
  // The check's tensors (a one-element op of the op's kind), kept until it ends.
  struct Probe {
    Tensor in, out;
  };
  struct Job {
    OpType type;
    std::function<void(hier::OpRun&)> schedule;  // the op, on the levels
    Clock::time_point deadline;                   // the op's timeout, counted from its issue
    std::chrono::milliseconds timeout;            // that timeout, for its Timeout's words
    WorkPtr work;
    std::shared_ptr<Probe> probe;
    WorkPtr check;  // the flat backend's check of the op
    std::shared_ptr<JobState> state;
  };
  // Queues an op for the thread, after issuing its check (`check`, given the probe, issues
  // it to the flat backend) in the group's issue order.
  WorkPtr enqueue(OpType type, const OpContext& ctx, const std::function<WorkPtr(Probe&)>& check,
                  std::function<void(hier::OpRun&)> schedule);
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
  // Aborts the groups within and across hosts (once): what runs in them fails now. On a
  // thread of its own; wait: returns once both are aborted (else at once: a hook's caller,
  // a recording thread, must not block).
  void abort_levels(bool wait);
  // An op whose levels failed while its check passed (a rank died mid-op): the group's
  // failure, recorded on the flat backend's board, so that every rank's flat backend names
  // it, then the flat backend and the levels are cut off. Another rank's record, when one
  // is there (this rank's failure is then its consequence), else this rank's, worded in
  // this group's ranks ("rank 3 died or closed its connection, seen by the group's level
  // 'world/hier_local1', where it is rank 1: ..."). A level's Timeout is the op's: it
  // names the op's timeout and blames nobody (the level had only what was left of it).
  // Returns what the op ends with.
  std::exception_ptr fail_group(std::exception_ptr error, const Job& job);
  // The culprit of a level's failure, in this group's ranks (-1 when unknown); level_rank:
  // the same rank in the level's; shut_down: whether the level blames it for shutting down.
  int culprit_of(const ProcessGroupPtr& level, int* level_rank, bool* shut_down) const;

  std::unique_ptr<Backend> flat_;
  const hier::Levels levels_;
  const ProcessGroupPtr& within_ = levels_.within;
  const ProcessGroupPtr& across_ = levels_.across;

  // The flat backend's first failure, as its GroupFailure told failure_ (a death its
  // connection watch saw, on a rank whose levels do not reach the dead rank): the levels
  // are aborted at once, and the op in flight ends with it. Before failure_: outlives it.
  std::mutex flat_failure_mu_;
  std::exception_ptr flat_failure_;
  int flat_culprit_ = -1;
  GroupFailure failure_;     // over the flat backend's board
  hier::Scratch scratch_;    // the thread's only

  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::mutex aborter_mu_;  // levels_aborted_'s setting and aborter_
  std::atomic<bool> levels_aborted_{false};
  std::thread aborter_;  // abort_levels's, until joined
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace distcomm
