#include "api/hierarchical_backend.h"

#include <pthread.h>

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "api/errors_internal.h"

namespace distcomm {

namespace {

hier::Levels levels_of(int rank, ProcessGroupPtr within, ProcessGroupPtr across, const HostLayout& hosts) {
  hier::Levels levels;
  levels.within = std::move(within);
  levels.across = std::move(across);
  levels.hosts = hosts;
  levels.rank = rank;
  levels.host = hosts.host_of[static_cast<size_t>(rank)];
  levels.local = hosts.local_rank_of[static_cast<size_t>(rank)];
  return levels;
}

}  // namespace

HierarchicalBackend::HierarchicalBackend(std::unique_ptr<Backend> flat, ProcessGroupPtr within, ProcessGroupPtr across,
                                         const HostLayout& hosts)
    : Backend(flat->options()),
      flat_(std::move(flat)),
      levels_(levels_of(flat_->rank(), std::move(within), std::move(across), hosts)),
      failure_(flat_->rank(), flat_->options().store),
      thread_([this, queue = queue_] { serve(queue); }) {
  failure_.set_world_ranks(flat_->options().global_ranks);
  failure_.on_abort([this] {
    flat_->abort();
    abort_levels(/*wait=*/true);
  });
  // The flat backend sees every rank's connection: a death on another host, where this
  // rank's levels do not reach, is known there first (its board may have died with the
  // rank). Not flat_->abort() here: this runs on the flat backend's own thread.
  failure_.on_sibling_failure([this](std::exception_ptr error, int culprit) {
    {
      std::lock_guard<std::mutex> lock(flat_failure_mu_);
      flat_failure_ = error;
      flat_culprit_ = culprit;
    }
    abort_levels(/*wait=*/false);  // the hook must not block (group_failure.h)
  });
}

HierarchicalBackend::~HierarchicalBackend() {
  failure_.stop_following();  // its hook aborts the levels, which go with this object
  shutdown();
  abort_levels(/*wait=*/true);  // an abort a hook began after an earlier stop(): joined
  // Joinable only when destroyed from its own thread (a Work's callback dropped the group):
  // it then reads nothing of this object but the queue it shares, sees it stopping and ends.
  if (thread_.joinable()) thread_.detach();
}

WorkPtr HierarchicalBackend::refused(OpType op, const OpContext& ctx) const {
  std::exception_ptr refusal = failure_.refusal();
  if (!refusal) return nullptr;
  auto work = std::make_shared<Work>(op, ctx.seq, ctx.description);
  work->finish(refusal);
  return work;
}

bool HierarchicalBackend::reduces_natively(ReduceOp op, DType dtype) const {
  if (op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM) return false;
  return flat_->reduces_natively(op, dtype);
}

namespace {

// Below these sizes (of the op's largest tensor: all_gather's output, reduce_scatter's
// input) an op runs flat: the levels' rounds and the check cost more than the bytes they
// save across hosts. Measured with tools/bench/hierarchy_vs_flat.sh --op (2 hosts x 2
// ranks at 1 Gbit/s, sizes 64 KiB to 64 MiB, 4x apart, on this project's shared 2-core
// host): broadcast loses at 64 KiB and wins from 256 KiB; all_gather loses up to 1 MiB and
// wins from 4 MiB, as does reduce_scatter (its mirror); all_reduce and reduce win from
// 64 KiB, where the noise of a loaded host makes smaller sizes unmeasurable (64 KiB errs
// towards flat).
size_t flat_below(OpType op) {
  switch (op) {
    case OpType::kBroadcast: return 256 << 10;
    case OpType::kAllGather:
    case OpType::kReduceScatter: return 4 << 20;
    default: return 64 << 10;
  }
}

}  // namespace

WorkPtr HierarchicalBackend::enqueue(OpType type, const OpContext& ctx, const std::function<WorkPtr(Probe&)>& check,
                                     std::function<void(hier::OpRun&)> schedule) {
  // A plain Work: its waiter blocks while the backend's thread runs the op, and the core's
  // net gives that thread the grace again after a process stop (Work::wait, api/work.cc).
  auto work = std::make_shared<Work>(type, ctx.seq, ctx.description);
  auto state = std::make_shared<JobState>();
  WorkPtr checked;
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    if (queue_->stopping) {
      work->finish(std::make_exception_ptr(PeerFailure("the group has been shut down on this rank")));
      return work;
    }
    // The op's identity, checked by the flat backend as it checks its own ops: a one-element
    // op of the same kind under this op's sequence number and fingerprint (gloo tags its
    // messages with it), issued now, in the group's issue order. Ranks that disagree on the
    // op, a rank that never issues it or is gone, are named there as on a flat group, in the
    // group's ranks and op numbers; the levels' own groups could only name theirs. It runs
    // beside the levels: one small flat round, which large ops hide.
    Job job{type, std::move(schedule), Clock::now() + ctx.timeout, ctx.timeout, work, std::make_shared<Probe>(), nullptr,
            state};
    job.check = checked = check(*job.probe);
    queue_->jobs.push_back(std::move(job));
  }
  queue_->cv.notify_one();
  // A check that fails ends the op then, not when the thread reaches it (an op queued
  // behind a stuck one times out from its own issue), and cuts the levels' ops off: the
  // group is unusable from here on. The op's Work ends here only if the thread has not
  // begun it (then nothing touches the tensor any more); else the thread ends it, once
  // the levels' ops, cut off, have let go of the tensor.
  checked->on_finish([this, state, work](std::exception_ptr error) {
    if (!error) return;
    bool end_here = false;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      end_here = !state->started;
      state->skipped = end_here;
    }
    if (end_here) work->finish(error);  // outside the lock: its callbacks are the caller's
    abort_levels(/*wait=*/false);  // on the flat backend's thread, which ends its ops
  });
  return work;
}

WorkPtr HierarchicalBackend::all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kAllReduce, ctx)) return no;
  if (tensor.nbytes() < flat_below(OpType::kAllReduce)) return flat_->all_reduce(tensor, opts, ctx);
  return enqueue(
      OpType::kAllReduce, ctx,
      [&](Probe& p) {
        p.out = Tensor::zeros({1}, tensor.dtype());
        return flat_->all_reduce(p.out, opts, ctx);
      },
      [tensor, op = opts.op](hier::OpRun& run) mutable { hier::all_reduce(run, tensor, op); });
}

WorkPtr HierarchicalBackend::broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kBroadcast, ctx)) return no;
  if (tensor.nbytes() < flat_below(OpType::kBroadcast)) return flat_->broadcast(tensor, opts, ctx);
  return enqueue(
      OpType::kBroadcast, ctx,
      [&](Probe& p) {
        p.out = Tensor::zeros({1}, tensor.dtype());
        return flat_->broadcast(p.out, opts, ctx);
      },
      [tensor, root = opts.root](hier::OpRun& run) mutable { hier::broadcast(run, tensor, root); });
}

WorkPtr HierarchicalBackend::reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kReduce, ctx)) return no;
  if (tensor.nbytes() < flat_below(OpType::kReduce)) return flat_->reduce(tensor, opts, ctx);
  return enqueue(
      OpType::kReduce, ctx,
      [&](Probe& p) {
        p.out = Tensor::zeros({1}, tensor.dtype());
        return flat_->reduce(p.out, opts, ctx);
      },
      [tensor, op = opts.op, root = opts.root](hier::OpRun& run) mutable { hier::reduce(run, tensor, op, root); });
}

WorkPtr HierarchicalBackend::all_gather(Tensor& output, const Tensor& input, const AllGatherOptions& opts,
                                        const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kAllGather, ctx)) return no;
  if (output.nbytes() < flat_below(OpType::kAllGather)) return flat_->all_gather(output, input, opts, ctx);
  return enqueue(
      OpType::kAllGather, ctx,
      [&](Probe& p) {
        p.in = Tensor::zeros({1}, input.dtype());
        p.out = Tensor::zeros({size()}, input.dtype());
        return flat_->all_gather(p.out, p.in, opts, ctx);
      },
      [output, input](hier::OpRun& run) mutable { hier::all_gather(run, output, input); });
}

WorkPtr HierarchicalBackend::reduce_scatter(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts,
                                            const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kReduceScatter, ctx)) return no;
  if (input.nbytes() < flat_below(OpType::kReduceScatter)) return flat_->reduce_scatter(output, input, opts, ctx);
  return enqueue(
      OpType::kReduceScatter, ctx,
      [&](Probe& p) {
        p.in = Tensor::zeros({size()}, input.dtype());
        p.out = Tensor::zeros({1}, input.dtype());
        return flat_->reduce_scatter(p.out, p.in, opts, ctx);
      },
      [output, input, op = opts.op](hier::OpRun& run) mutable { hier::reduce_scatter(run, output, input, op); });
}

namespace {

// Aborts both levels, at once: each stops its own stall watch, which may be in a look at a
// store that no longer answers (its server stopped, the network to it cut); one after the
// other, the caller waited for both.
void abort_both(const ProcessGroupPtr& within, const ProcessGroupPtr& across) {
  std::thread across_abort;
  if (across) {
    try {
      across_abort = std::thread([level = across] { level->abort(); });
    } catch (const std::system_error&) {
      across->abort();  // no thread to be had: here, after all
    }
  }
  within->abort();
  if (across_abort.joinable()) across_abort.join();
}

}  // namespace

void HierarchicalBackend::abort_levels(bool wait) {
  std::thread done;     // the aborting thread, to be joined here (wait)
  bool here = false;    // no thread to be had: aborted on this one
  {
    std::lock_guard<std::mutex> lock(aborter_mu_);
    // Once: ProcessGroup::abort is idempotent, but each call costs the backends' stops.
    if (!levels_aborted_.exchange(true)) {
      // On a thread of its own, which holds the levels (never this object): the caller may
      // be a recording thread (the flat backend's, the sibling hook; a check's callback),
      // which must not block, and a level's stop waits for its stall watch's last report.
      try {
        aborter_ = std::thread([within = within_, across = across_] { abort_both(within, across); });
      } catch (const std::system_error&) {
        here = true;
      }
    }
    if (wait) done = std::move(aborter_);
  }
  if (here) abort_both(within_, across_);
  if (done.joinable()) {
    if (done.get_id() == std::this_thread::get_id()) {
      done.detach();
    } else {
      done.join();
    }
  }
}

int HierarchicalBackend::culprit_of(const ProcessGroupPtr& level, int* level_rank, bool* shut_down) const {
  if (!level) return -1;
  // The level's backend recorded its failure before its op ended, and published it.
  const GroupFailure reader(level->rank(), level->backend_for(DeviceType::kCPU).options().store);
  const std::optional<FailureRecord> record = reader.published(std::chrono::milliseconds(300));
  if (!record || record->culprit < 0 || record->culprit >= level->size()) return -1;
  if (level_rank) *level_rank = record->culprit;
  if (shut_down) *shut_down = record->kind == FailureRecord::Kind::kShutDown;
  const int world = level->global_rank(record->culprit);
  const std::vector<int>& mine = flat_->options().global_ranks;
  const auto it = std::find(mine.begin(), mine.end(), world);
  return it == mine.end() ? -1 : static_cast<int>(it - mine.begin());
}

std::exception_ptr HierarchicalBackend::fail_group(std::exception_ptr error, const Job& job) {
  const Work& op = *job.work;
  if (failure_.failed()) return failure_.refusal();
  // The flat backend's failure, once it has one, is the group's: it saw the first death
  // through its own connection, also where the board died with that rank.
  auto flat_failed = [&]() -> std::exception_ptr {
    std::exception_ptr flat;
    int culprit = -1;
    {
      std::lock_guard<std::mutex> lock(flat_failure_mu_);
      flat = flat_failure_;
      culprit = flat_culprit_;
    }
    return flat ? failure_.record(flat, op, culprit) : nullptr;
  };
  if (std::exception_ptr flat = flat_failed()) return flat;
  // What this rank's level saw: whom it blames, in the level's ranks and in the group's.
  int level_rank = -1;
  bool shut_down = false;
  const ProcessGroupPtr* level = &within_;
  int culprit = culprit_of(within_, &level_rank, &shut_down);
  if (culprit < 0) {
    level = &across_;
    culprit = culprit_of(across_, &level_rank, &shut_down);
  }
  // A record on the flat board comes first: a level's failure here is often the consequence
  // of one elsewhere, which was published before that rank aborted its levels ("rank 1 shut
  // the group down" is always such a consequence: then the record is waited for longer).
  // It may be this rank's own, by the flat backend (which saw a connection close): the
  // hierarchy has recorded nothing yet. Each look is a reader of its own: one slow answer
  // must not make the board count as gone.
  const auto window = std::chrono::milliseconds(shut_down || culprit < 0 ? 2000 : 300);
  const auto until = Clock::now() + window;
  std::optional<FailureRecord> cause;
  for (;;) {
    const GroupFailure reader(rank(), flat_->options().store);
    cause = reader.published(std::chrono::milliseconds(300));
    if (cause) break;
    if (std::exception_ptr flat = flat_failed()) return flat;
    if (Clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // "rank 3 (world rank 4)" in a subgroup: GroupFailure then adds no note of its own for the
  // culprit, which would follow the level's note in the level's numbering (set_world_ranks).
  // A level's words may end with the level's map of its ranks; GroupFailure may add this
  // group's: each names its group ("group 'world/g0/...' ranks [0, 1] are world ranks ...").
  auto rank_text = [this](int r) {
    const std::vector<int>& world = options().global_ranks;
    const bool differs = r >= 0 && static_cast<size_t>(r) < world.size() && world[static_cast<size_t>(r)] != r;
    return "rank " + std::to_string(r) + (differs ? " (world rank " + std::to_string(world[static_cast<size_t>(r)]) + ")" : "");
  };
  if (cause && cause->kind == FailureRecord::Kind::kTimeout && cause->culprit < 0) {
    // Another rank's op ran out of time (a level's Timeout, reworded above, blames nobody):
    // it timed out first, which makes no rank the culprit.
    return failure_.record(with_message(error, rank_text(cause->rank) + " of the group timed out first: " + cause->message),
                           op);
  }
  if (cause) {
    const int first = cause->culprit >= 0 ? cause->culprit : cause->rank;
    // The recorder is not the culprit when the record names another: "rank 1 failed first"
    // over rank 0's death sent readers to a healthy rank (a review's finding).
    const std::string who = cause->culprit >= 0 && cause->culprit != cause->rank
                                ? rank_text(cause->rank) + " of the group recorded the failure first: "
                                : rank_text(cause->rank) + " of the group failed first: ";
    return failure_.record(with_message(error, who + cause->message), op, first);
  }
  // The op's time ran out in a level, which had only what was left of it (a level's "1 ms"
  // and "rank 2 failed" sent a user looking for a crash on a healthy host): the op's own
  // timeout, and where it ran out, blaming nobody, as a flat group's Timeout does.
  try {
    std::rethrow_exception(error);
  } catch (const Timeout&) {
    // The level is known where its record names whom it waited for (else the level's own
    // words, quoted, name it).
    const std::string where = culprit < 0 ? "" : " in the group's level '" + (*level)->name() + "', waiting for " +
                                                     rank_text(culprit) + " (rank " + std::to_string(level_rank) +
                                                     " there)";
    return failure_.record(with_message(error, "did not finish within its timeout of " +
                                               std::to_string(job.timeout.count()) +
                                               " ms, counted from when it was issued; it ran out" + where + ": " +
                                               message_of(error)),
                           op);
  } catch (...) {
  }
  if (culprit < 0) return failure_.record(error, op);
  // This rank's level saw it first: the culprit in the group's ranks, the level's words after.
  std::string message = rank_text(culprit) + (shut_down ? " shut its part of the group down" : " died or closed its connection");
  try {
    std::rethrow_exception(error);
  } catch (const PeerFailure&) {
  } catch (...) {
    message = rank_text(culprit) + " failed";
  }
  message += ", seen by the group's level '" + (*level)->name() + "', where it is rank " +
             std::to_string(level_rank) + ": " + message_of(error);
  return failure_.record(with_message(error, message), op, culprit);
}

void HierarchicalBackend::serve(const std::shared_ptr<Queue>& queue) {
  pthread_setname_np(pthread_self(), "dc-hier");
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(queue->mu);
      queue->cv.wait(lock, [&] { return queue->stopping || !queue->jobs.empty(); });
      // Stopping: stop() has ended what was queued; this object may be gone already.
      if (queue->stopping) return;
      job = std::move(queue->jobs.front());
      queue->jobs.pop_front();
    }
    {
      std::lock_guard<std::mutex> lock(job.state->mu);
      if (job.state->skipped) continue;  // its check failed first, and ended it
      job.state->started = true;
    }
    std::exception_ptr failure;
    try {
      run(job);
    } catch (...) {
      failure = std::current_exception();
    }
    // The check's verdict comes first: what it names is what the flat group would say.
    try {
      job.check->wait();
      if (failure) failure = fail_group(failure, job);
    } catch (...) {
      failure = std::current_exception();
    }
    job.work->finish(failure);  // may destroy this object (its callbacks are the caller's)
  }
}

void HierarchicalBackend::run(Job& job) {
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    if (queue_->stopping) {
      throw PeerFailure(std::string("the group was shut down before this ") + op_type_name(job.type) + " ran");
    }
  }
  hier::OpRun run{levels_, scratch_, job.deadline};
  job.schedule(run);
}

WorkPtr HierarchicalBackend::gather(Tensor& output, const Tensor& input, const GatherOptions& opts,
                                    const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kGather, ctx)) return no;
  return flat_->gather(output, input, opts, ctx);
}
WorkPtr HierarchicalBackend::scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts,
                                     const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kScatter, ctx)) return no;
  return flat_->scatter(output, input, opts, ctx);
}
WorkPtr HierarchicalBackend::all_to_all(Tensor& output, const Tensor& input, const std::vector<int64_t>& output_counts,
                                        const std::vector<int64_t>& input_counts, const AllToAllOptions& opts,
                                        const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kAllToAll, ctx)) return no;
  return flat_->all_to_all(output, input, output_counts, input_counts, opts, ctx);
}
WorkPtr HierarchicalBackend::barrier(const BarrierOptions& opts, const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kBarrier, ctx)) return no;
  return flat_->barrier(opts, ctx);
}
WorkPtr HierarchicalBackend::send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kSend, ctx)) return no;
  return flat_->send(tensor, dst, opts, ctx);
}
WorkPtr HierarchicalBackend::recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kRecv, ctx)) return no;
  return flat_->recv(tensor, src, opts, ctx);
}
WorkPtr HierarchicalBackend::recv_any_source(Tensor& tensor, const P2POptions& opts, const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kRecvAnySource, ctx)) return no;
  return flat_->recv_any_source(tensor, opts, ctx);
}
WorkPtr HierarchicalBackend::batch_p2p(std::vector<P2POp>& ops, const P2POptions& opts, const OpContext& ctx) {
  if (WorkPtr no = refused(OpType::kBatchP2P, ctx)) return no;
  return flat_->batch_p2p(ops, opts, ctx);
}
Backend* HierarchicalBackend::create_subgroup_backend(const BackendOptions* options, const std::vector<int>& members) {
  return flat_->create_subgroup_backend(options, members);
}

void HierarchicalBackend::stop(bool abort) {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    if (queue_->stopping) return;  // shutdown and abort are idempotent
    queue_->stopping = true;
    dropped.swap(queue_->jobs);
  }
  queue_->cv.notify_all();
  for (Job& job : dropped) {
    job.work->finish(std::make_exception_ptr(
        PeerFailure(std::string("the group was shut down before this ") + op_type_name(job.type) + " ran")));
  }
  // An op still running waits on its levels, then on its check: cutting both off
  // ends it now (a clean destroy comes after the program's waits, so there is none then),
  // never after a peer or the op's timeout. Then the thread can be joined.
  abort_levels(/*wait=*/true);
  if (abort) {
    flat_->abort();
  } else {
    flat_->shutdown();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void HierarchicalBackend::shutdown() { stop(false); }
void HierarchicalBackend::abort() { stop(true); }

}  // namespace distcomm
