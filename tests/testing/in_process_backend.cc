// A test-only plugin, libdistcomm_in_process.so: the ranks of a group are ProcessGroups of
// one process (one thread per rank, or one thread issuing every rank's op in turn), and
// the backend moves bytes by reading the other ranks' tensors directly. It exists so the
// ProcessGroup's own logic (AVG / PREMUL_SUM on the host, list packing, capability
// refusal, validation, subgroups) runs at group sizes above one without processes or
// sockets; the transports themselves are tested by the conformance suites.
//
// Each collective is a round keyed by its sequence number: every rank deposits its
// tensors, fingerprint and Work, and the last rank to arrive compares the fingerprints
// (Desync with the table of what each rank runs, when they disagree) and computes every
// rank's result (reductions in rank order, with the core's kernels) and finishes all the
// Works. An op that not every rank joins fails at its timeout (the Work's wait has that
// deadline), naming the ranks that have not issued it. Sends are buffered; a receive
// matches by (source, tag) in the order the sends were made, and fails on a message of
// another size naming both (of the same size and another dtype it delivers, as MPI does:
// DETAIL's checks are tested over it).
//
// The group fails as a whole, as GroupFailure makes a real backend's: its first failure (a
// timeout, a Desync, a rank's group destroyed) ends every op waiting in a round and is
// quoted by every later op of every rank.
//
// Settings (BackendOptions::config):
//   in_process_ops  the ops it lists in supported_ops(), comma-separated op names ("all":
//                   every op it implements but batch_isend_irecv), to test the core's
//                   capability refusal. Listed, batch_isend_irecv makes the core hand it
//                   whole batches, as it does nccl's (the parts still go one by one here).
//   in_process_lists the ops whose list forms it takes whole (Backend::list_ops), as nccl
//                   does for CUDA tensors (default: all five, all_gather, gather,
//                   scatter, reduce_scatter, all_to_all). The core hands it lists of device tensors
//                   only: here their memory is the host's whatever device they name (the
//                   tests make them so), and a list goes through a flat buffer and the flat op.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "api/errors.h"
#include "api/diagnostics/op_fingerprint.h"
#include "api/plugin/plugin.h"
#include "api/reduce_op.h"

namespace {

using namespace distcomm;
using Clock = std::chrono::steady_clock;

#ifdef IN_PROCESS_SERVES_CUDA
constexpr const char* kPluginName = "in_process_cuda";
#else
constexpr const char* kPluginName = "in_process";
#endif

// How many ops' callbacks this thread is running: an op's callbacks run on the thread that
// ends it, often another rank's (the sender's, for a recv), whose next op a wait() there
// would stop; such a wait is refused, as gloo's and mpi's are.
thread_local int g_callbacks_running = 0;

// Ends `work` (its callbacks run here).
void end_op(Work& work, std::exception_ptr error = nullptr) {
  ++g_callbacks_running;
  struct Leave {
    ~Leave() { --g_callbacks_running; }
  } leave;
  work.finish(error);
}

// A Work whose wait() ends at the op's deadline: an op some rank never joined fails there,
// with the error timed_out() makes (which also fails the group).
class DeadlineWork : public Work {
 public:
  DeadlineWork(OpType op, const OpContext& ctx, std::function<std::exception_ptr(Work*)> timed_out = nullptr)
      : Work(op, ctx.seq, ctx.description),
        timeout_(ctx.timeout),
        deadline_(Clock::now() + ctx.timeout),
        timed_out_(std::move(timed_out)) {}
  void wait(std::chrono::milliseconds timeout = kUseDefault) override {
    if (g_callbacks_running > 0 && !is_completed()) {
      throw Error(description() + ": Work::wait called from a Work callback (on_finish): the in_process backend "
                  "runs it on the thread that ended the op, often another rank's, whose next op this wait would stop; "
                  "chain the next step with on_finish instead");
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
    const auto until_deadline = std::max(left, std::chrono::milliseconds(0));
    if (!is_use_default(timeout) && timeout < until_deadline) return Work::wait(timeout);
    try {
      Work::wait(until_deadline);
      return;
    } catch (const Timeout&) {
    }
    end_op(*this, timed_out_ ? timed_out_(this)
                             : std::make_exception_ptr(Timeout("not every rank joined within the op's timeout of " +
                                                               std::to_string(timeout_.count()) + " ms")));
    Work::wait();
  }

 private:
  const std::chrono::milliseconds timeout_;
  const Clock::time_point deadline_;
  const std::function<std::exception_ptr(Work*)> timed_out_;
};

// One rank's part of a collective.
struct Part {
  OpType op = OpType::kBarrier;
  Tensor out;  // the tensor the rank's result goes to (in place: the same as in)
  Tensor in;
  ReduceOp reduction = ReduceOp::SUM;
  int root = 0;
  std::vector<int64_t> out_counts, in_counts;  // all_to_all
  OpFingerprint fingerprint;
  std::shared_ptr<Work> work;
  bool arrived = false;
};

void copy_bytes(const Tensor& dst, int64_t dst_offset, const Tensor& src, int64_t src_offset, int64_t count) {
  const size_t es = element_size(src.dtype());
  if (count > 0 && (dst.data() != src.data() || dst_offset != src_offset)) {
    std::memcpy(static_cast<char*>(dst.data()) + dst_offset * es, static_cast<const char*>(src.data()) + src_offset * es,
                static_cast<size_t>(count) * es);
  }
}

// The reduction over every rank of `count` elements of each part's input from `offset`.
Tensor reduced(const std::vector<Part>& parts, int64_t offset, int64_t count) {
  Tensor acc = Tensor::empty({count}, parts[0].in.dtype());
  copy_bytes(acc, 0, parts[0].in, offset, count);
  const size_t es = element_size(acc.dtype());
  for (size_t r = 1; r < parts.size(); ++r) {
    reduce_into(acc.data(), static_cast<const char*>(parts[r].in.data()) + offset * es, static_cast<size_t>(count),
                acc.dtype(), parts[0].reduction);
  }
  return acc;
}

int64_t offset_of(const std::vector<int64_t>& counts, size_t block) {
  int64_t o = 0;
  for (size_t i = 0; i < block; ++i) o += counts[i];
  return o;
}

// Throws Desync when the ranks' fingerprints of one round disagree: the table of what each
// rank runs there, or all_to_all's splits that do not pair.
void check_agreement(const std::vector<Part>& parts) {
  std::vector<std::optional<OpFingerprint>> by_rank;
  std::vector<OpFingerprint> all;
  bool differ = false;
  for (const Part& p : parts) {
    by_rank.emplace_back(p.fingerprint);
    all.push_back(p.fingerprint);
    differ = differ || p.fingerprint.agreement_hash() != parts[0].fingerprint.agreement_hash();
  }
  const uint64_t seq = parts[0].fingerprint.seq;
  if (differ) {
    throw Desync("the ranks disagree on collective #" + std::to_string(seq) + ". Each rank's op there:\n" +
                 fingerprint_table(by_rank));
  }
  if (parts[0].op == OpType::kAllToAll) {
    const std::string unpaired = all_to_all_mismatches(all);
    if (!unpaired.empty()) {
      throw Desync("all_to_all #" + std::to_string(seq) + ": the ranks' splits do not pair:\n" + unpaired);
    }
  }
}

// Every rank's result from every rank's part; throws when the parts disagree.
void compute(std::vector<Part>& parts) {
  const int n = static_cast<int>(parts.size());
  const Part& first = parts[0];
  check_agreement(parts);
  switch (first.op) {
    case OpType::kBarrier: return;
    case OpType::kAllReduce: {
      const Tensor acc = reduced(parts, 0, first.in.numel());
      for (Part& p : parts) copy_bytes(p.out, 0, acc, 0, acc.numel());
      return;
    }
    case OpType::kReduce: {
      const Tensor acc = reduced(parts, 0, first.in.numel());
      copy_bytes(parts[static_cast<size_t>(first.root)].out, 0, acc, 0, acc.numel());
      return;
    }
    case OpType::kBroadcast: {
      const Part& root = parts[static_cast<size_t>(first.root)];
      for (Part& p : parts) copy_bytes(p.out, 0, root.in, 0, root.in.numel());
      return;
    }
    case OpType::kAllGather:
    case OpType::kGather: {
      for (int r = 0; r < n; ++r) {
        if (first.op == OpType::kGather && r != first.root) continue;
        for (int s = 0; s < n; ++s) {
          const Tensor& in = parts[static_cast<size_t>(s)].in;
          copy_bytes(parts[static_cast<size_t>(r)].out, s * in.numel(), in, 0, in.numel());
        }
      }
      return;
    }
    case OpType::kScatter: {
      const Tensor& in = parts[static_cast<size_t>(first.root)].in;
      for (int r = 0; r < n; ++r) {
        Tensor& out = parts[static_cast<size_t>(r)].out;
        copy_bytes(out, 0, in, r * out.numel(), out.numel());
      }
      return;
    }
    case OpType::kReduceScatter: {
      for (int r = 0; r < n; ++r) {
        Tensor& out = parts[static_cast<size_t>(r)].out;
        copy_bytes(out, 0, reduced(parts, r * out.numel(), out.numel()), 0, out.numel());
      }
      return;
    }
    case OpType::kAllToAll: {
      for (size_t r = 0; r < parts.size(); ++r) {
        for (size_t s = 0; s < parts.size(); ++s) {
          const int64_t count = parts[s].in_counts[r];
          if (count != parts[r].out_counts[s]) {
            throw InvalidArgument("all_to_all: rank " + std::to_string(s) + " sends " + std::to_string(count) +
                                  " elements to rank " + std::to_string(r) + ", which expects " +
                                  std::to_string(parts[r].out_counts[s]));
          }
          copy_bytes(parts[r].out, offset_of(parts[r].out_counts, s), parts[s].in, offset_of(parts[s].in_counts, r),
                     count);
        }
      }
      return;
    }
    default: throw Unsupported(std::string("in_process: no collective ") + op_type_name(first.op));
  }
}

// What the ranks of one group share.
struct Shared {
  explicit Shared(int n) : size(n), last_collective(static_cast<size_t>(n)), last_finished(static_cast<size_t>(n)) {}
  const int size;
  std::mutex mu;
  std::map<uint64_t, std::vector<Part>> rounds;  // collectives in progress, by sequence number
  // Each rank's last collective and whether its round has completed: where a rank is, for
  // a Timeout that names the ranks that have not come.
  std::vector<std::optional<OpFingerprint>> last_collective;
  std::vector<bool> last_finished;
  // Point to point: sends not yet received, per (src, dst, tag) in send order; receives
  // waiting for a send.
  std::map<std::tuple<int, int, int>, std::deque<Tensor>> mail;
  struct PendingRecv {
    Tensor into;
    int src;  // -1: any
    int tag;
    std::shared_ptr<Work> work;
  };
  std::map<int, std::deque<PendingRecv>> receives;  // by receiving rank
  // The group's first failure; every later op of every rank is refused with it.
  std::exception_ptr failure;

  // Records `error` as the group's failure unless it has one, and ends every op still
  // waiting, on every rank, with the first. Returns the first failure. Called under mu.
  // `self`, the op that failed, is left to its caller.
  std::exception_ptr fail(std::exception_ptr error, std::vector<std::shared_ptr<Work>>* to_end,
                          const Work* self = nullptr) {
    if (!failure) failure = error;
    for (auto& round : rounds) {
      for (Part& p : round.second) {
        if (p.arrived && p.work.get() != self) to_end->push_back(p.work);
      }
    }
    rounds.clear();
    for (auto& waiting : receives) {
      for (PendingRecv& r : waiting.second) {
        if (r.work.get() != self) to_end->push_back(r.work);
      }
    }
    receives.clear();
    return failure;
  }
  // What a later op is refused with.
  std::exception_ptr refusal() const {
    return with_context(failure, "the group is unusable since an earlier failure, which was");
  }
};

// parts end to end in one host tensor (their bytes are the host's: see in_process_lists).
Tensor packed(const std::vector<Tensor>& parts) {
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.numel();
  Tensor flat = Tensor::empty({total}, parts.front().dtype());
  int64_t offset = 0;
  for (const Tensor& p : parts) {
    copy_bytes(flat, offset, p, 0, p.numel());
    offset += p.numel();
  }
  return flat;
}

// work, then flat's elements copied back into parts, end to end.
WorkPtr unpacked_after(const WorkPtr& work, const Tensor& flat, std::vector<Tensor> parts) {
  return then(work, [flat, parts] {
    int64_t offset = 0;
    for (const Tensor& p : parts) {
      copy_bytes(p, 0, flat, offset, p.numel());
      offset += p.numel();
    }
  });
}

// Ends `works` with the group's refusal; outside the group's lock (callbacks run).
void end_all(const std::vector<std::shared_ptr<Work>>& works, const std::exception_ptr& error) {
  for (const auto& w : works) end_op(*w, error);
}

// The groups of this process, by the id their rank 0 published in the group's store.
std::mutex g_groups_mu;
std::map<std::string, std::weak_ptr<Shared>> g_groups;
std::atomic<uint64_t> g_next_group{0};

std::vector<OpType> parse_ops(const std::string& list) {
  static const std::vector<OpType> kAll = {
      OpType::kAllReduce, OpType::kBroadcast, OpType::kReduce,   OpType::kAllGather, OpType::kGather,
      OpType::kScatter,   OpType::kReduceScatter, OpType::kAllToAll, OpType::kBarrier,   OpType::kSend,
      OpType::kRecv,      OpType::kRecvAnySource};
  if (list == "all") return kAll;
  std::vector<OpType> ops;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name == "all") {
      ops.insert(ops.end(), kAll.begin(), kAll.end());
      continue;
    }
    if (name == op_type_name(OpType::kBatchP2P)) {
      ops.push_back(OpType::kBatchP2P);
      continue;
    }
    auto it = std::find_if(kAll.begin(), kAll.end(), [&](OpType op) { return name == op_type_name(op); });
    if (it == kAll.end()) throw InvalidArgument("in_process_ops: no op '" + name + "'");
    ops.push_back(*it);
  }
  return ops;
}

class InProcessBackend : public Backend {
 public:
  explicit InProcessBackend(BackendOptions o) : Backend(std::move(o)) {
    auto it = options().config.find("in_process_ops");
    ops_ = parse_ops(it == options().config.end() ? "all" : it->second);
    auto lists = options().config.find("in_process_lists");
    if (lists == options().config.end()) {
      list_ops_ = {OpType::kAllGather, OpType::kGather, OpType::kScatter, OpType::kReduceScatter, OpType::kAllToAll};
    } else {
      list_ops_ = parse_ops(lists->second);
    }
    if (!options().store) throw InvalidArgument("in_process: needs the group's store");
    std::lock_guard<std::mutex> lock(g_groups_mu);
    if (rank() == 0) {
      const std::string id = std::to_string(g_next_group++);
      shared_ = std::make_shared<Shared>(size());
      g_groups[id] = shared_;
      options().store->set("in_process/id", id);
    }
  }
  ~InProcessBackend() override { shutdown(); }

  std::string name() const override { return kPluginName; }
  std::vector<OpType> supported_ops() const override { return ops_; }
  std::vector<OpType> list_ops() const override { return list_ops_; }
  bool reduces_natively(ReduceOp op, DType) const override {
    // The core's host fallback is what the tests exercise.
    return op.kind != ReduceOp::AVG && op.kind != ReduceOp::PREMUL_SUM;
  }

  // This rank's group is destroyed: to the other ranks, a rank that has gone. Their ops
  // waiting for it end, and later ones are refused, naming it.
  void shutdown() override {
    if (!shared_ || shut_down_) return;
    shut_down_ = true;
    Shared& s = *shared_;
    std::vector<std::shared_ptr<Work>> to_end;
    std::exception_ptr first;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.failure) return;
      first = s.fail(std::make_exception_ptr(PeerFailure(
                         "rank " + std::to_string(rank()) + " shut the group down (its ProcessGroup was destroyed)")),
                     &to_end);
    }
    end_all(to_end, first);
  }

  WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o, const OpContext& c) override {
    return join(c, OpType::kAllReduce, t, t, o.op, 0);
  }
  WorkPtr broadcast(Tensor& t, const BroadcastOptions& o, const OpContext& c) override {
    return join(c, OpType::kBroadcast, t, t, ReduceOp::SUM, o.root);
  }
  WorkPtr reduce(Tensor& t, const ReduceOptions& o, const OpContext& c) override {
    return join(c, OpType::kReduce, t, t, o.op, o.root);
  }
  WorkPtr all_gather(Tensor& out, const Tensor& in, const AllGatherOptions&, const OpContext& c) override {
    return join(c, OpType::kAllGather, out, in, ReduceOp::SUM, 0);
  }
  WorkPtr gather(Tensor& out, const Tensor& in, const GatherOptions& o, const OpContext& c) override {
    return join(c, OpType::kGather, out, in, ReduceOp::SUM, o.root);
  }
  WorkPtr scatter(Tensor& out, const Tensor& in, const ScatterOptions& o, const OpContext& c) override {
    return join(c, OpType::kScatter, out, in, ReduceOp::SUM, o.root);
  }
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions& o, const OpContext& c) override {
    return join(c, OpType::kReduceScatter, out, in, o.op, 0);
  }
  WorkPtr all_to_all(Tensor& out, const Tensor& in, const std::vector<int64_t>& out_counts,
                     const std::vector<int64_t>& in_counts, const AllToAllOptions&, const OpContext& c) override {
    return join(c, OpType::kAllToAll, out, in, ReduceOp::SUM, 0, out_counts, in_counts);
  }

  WorkPtr all_gather_list(std::vector<Tensor>& outs, const Tensor& in, const AllGatherOptions& o,
                          const OpContext& c) override {
    Tensor flat = Tensor::empty({in.numel() * size()}, in.dtype());
    return unpacked_after(all_gather(flat, in, o, c), flat, outs);
  }
  WorkPtr gather_list(std::vector<Tensor>& outs, const Tensor& in, const GatherOptions& o, const OpContext& c) override {
    const bool root = rank() == o.root;
    Tensor flat = root ? Tensor::empty({in.numel() * size()}, in.dtype()) : Tensor();
    WorkPtr w = gather(flat, in, o, c);
    return root ? unpacked_after(w, flat, outs) : w;
  }
  WorkPtr scatter_list(Tensor& out, const std::vector<Tensor>& ins, const ScatterOptions& o,
                       const OpContext& c) override {
    return scatter(out, rank() == o.root ? packed(ins) : Tensor(), o, c);
  }
  WorkPtr reduce_scatter_list(Tensor& out, const std::vector<Tensor>& ins, const ReduceScatterOptions& o,
                              const OpContext& c) override {
    return reduce_scatter(out, packed(ins), o, c);
  }
  WorkPtr all_to_all_list(std::vector<Tensor>& outs, const std::vector<Tensor>& ins, const AllToAllOptions& o,
                          const OpContext& c) override {
    std::vector<int64_t> out_counts, in_counts;
    int64_t total = 0;
    for (size_t r = 0; r < outs.size(); ++r) {
      out_counts.push_back(outs[r].numel());
      in_counts.push_back(ins[r].numel());
      total += outs[r].numel();
    }
    Tensor flat = Tensor::empty({total}, ins.front().dtype());
    return unpacked_after(all_to_all(flat, packed(ins), out_counts, in_counts, o, c), flat, outs);
  }

  WorkPtr barrier(const BarrierOptions&, const OpContext& c) override {
    return join(c, OpType::kBarrier, Tensor(), Tensor(), ReduceOp::SUM, 0);
  }

  WorkPtr send(const Tensor& t, int dst, const P2POptions& o, const OpContext& c) override {
    auto work = std::make_shared<DeadlineWork>(OpType::kSend, c);
    Shared& s = shared();
    std::unique_lock<std::mutex> lock(s.mu);
    if (s.failure) return refused(work, s);
    auto& waiting = s.receives[dst];
    for (auto it = waiting.begin(); it != waiting.end(); ++it) {
      if ((it->src == rank() || it->src < 0) && it->tag == o.tag) {
        PendingRecv r = std::move(*it);
        waiting.erase(it);
        lock.unlock();
        deliver(r, t, rank());
        end_op(*work);
        return work;
      }
    }
    s.mail[{rank(), dst, o.tag}].push_back(t.clone());
    lock.unlock();
    end_op(*work);  // buffered
    return work;
  }
  WorkPtr recv(Tensor& t, int src, const P2POptions& o, const OpContext& c) override {
    return receive(OpType::kRecv, t, src, o.tag, c);
  }
  WorkPtr recv_any_source(Tensor& t, const P2POptions& o, const OpContext& c) override {
    return receive(OpType::kRecvAnySource, t, -1, o.tag, c);
  }
  WorkPtr batch_p2p(std::vector<P2POp>& ops, const P2POptions& o, const OpContext& c) override {
    std::vector<WorkPtr> parts;
    for (P2POp& op : ops) {
      parts.push_back(op.kind == P2POp::Kind::kSend ? send(op.tensor, op.peer, o, c) : recv(op.tensor, op.peer, o, c));
    }
    return all_of(parts, OpType::kBatchP2P, c.seq, c.description);
  }

 private:
  using PendingRecv = Shared::PendingRecv;

  Shared& shared() {
    if (!shared_) {
      // Ranks other than 0 attach at their first op: creating a group needs no thread per rank.
      const std::string id = options().store->get_string("in_process/id");
      std::lock_guard<std::mutex> lock(g_groups_mu);
      shared_ = g_groups[id].lock();
      if (!shared_ || shared_->size != size()) throw PeerFailure("in_process: group " + id + " is gone");
    }
    return *shared_;
  }

  // The op, ended at once with the group's first failure. Called under s.mu.
  static WorkPtr refused(const std::shared_ptr<Work>& work, const Shared& s) {
    end_op(*work, s.refusal());
    return work;
  }

  // A message of another size than the recv's tensor fails the recv, naming both; one of
  // the same size is delivered whatever its dtype (MPI's behaviour, which DETAIL checks).
  static void deliver(PendingRecv& r, const Tensor& data, int src) {
    if (data.nbytes() != r.into.nbytes()) {
      end_op(*r.work, std::make_exception_ptr(InvalidArgument(
          "this recv holds " + elements_text(r.into.numel(), r.into.dtype()) + " but rank " + std::to_string(src) +
          " sends " + elements_text(data.numel(), data.dtype()) +
          "; the message was discarded, and the sender cannot tell (its send was buffered)")));
      return;
    }
    copy_bytes(r.into, 0, data, 0, data.numel());
    r.work->set_source_rank(src);
    end_op(*r.work);
  }

  WorkPtr receive(OpType op, Tensor& t, int src, int tag, const OpContext& c) {
    PendingRecv r{t, src, tag, std::make_shared<DeadlineWork>(op, c)};
    Shared& s = shared();
    std::unique_lock<std::mutex> lock(s.mu);
    // A message sent before the group failed is still received (a rank that sent and left,
    // as an eager MPI send's would be).
    for (int from = 0; from < size(); ++from) {
      if (src >= 0 && from != src) continue;
      auto it = s.mail.find({from, rank(), tag});
      if (it == s.mail.end() || it->second.empty()) continue;
      Tensor data = std::move(it->second.front());
      it->second.pop_front();
      lock.unlock();
      deliver(r, data, from);
      return r.work;
    }
    if (s.failure) return refused(r.work, s);
    s.receives[rank()].push_back(r);
    return r.work;
  }

  // The Timeout of collective #seq of a group of n ranks, naming the ranks that have not
  // issued it, which fails the group (the other ops waiting end with it). Static: the Work
  // may outlive the backend.
  static std::exception_ptr timed_out(const std::shared_ptr<Shared>& shared, Work* self, const OpContext& c) {
    Shared& s = *shared;
    std::vector<std::shared_ptr<Work>> to_end;
    std::exception_ptr mine, first;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      auto round = s.rounds.find(c.seq);
      // Gone: the round is being computed, or ended by the group's failure; its Works are
      // ended there (the first finish counts).
      if (round == s.rounds.end()) return s.failure ? s.refusal() : std::make_exception_ptr(Timeout("timed out"));
      // "rank 1 has not issued #1 yet (its last collective: barrier #0, finished)", ranks
      // that stand at the same place together.
      std::map<std::string, std::vector<int>> missing;
      for (int r = 0; r < s.size; ++r) {
        if (round->second[static_cast<size_t>(r)].arrived) continue;
        const auto& last = s.last_collective[static_cast<size_t>(r)];
        missing[last ? "#" + std::to_string(c.seq) + " yet (its last collective: " + last->describe() +
                           (s.last_finished[static_cast<size_t>(r)] ? ", finished)" : ", running)")
                     : "any collective yet"]
            .push_back(r);
      }
      std::string who;
      for (const auto& m : missing) {
        who += (who.empty() ? "" : "; ") +
               (m.second.size() == 1 ? "rank " + std::to_string(m.second[0]) + " has not issued "
                                     : "ranks " + rank_list_text(m.second) + " have not issued ") +
               m.first;
      }
      mine = with_context(std::make_exception_ptr(Timeout("not every rank joined within the op's timeout of " +
                                                          std::to_string(c.timeout.count()) + " ms: " + who)),
                          c.description);
      first = s.fail(mine, &to_end, self);
    }
    const std::exception_ptr refusal = s.refusal();
    end_all(to_end, refusal);
    return first == mine ? mine : refusal;
  }

  WorkPtr join(const OpContext& c, OpType op, const Tensor& out, const Tensor& in, ReduceOp reduction, int root,
               std::vector<int64_t> out_counts = {}, std::vector<int64_t> in_counts = {}) {
    if (reduction.kind == ReduceOp::AVG || reduction.kind == ReduceOp::PREMUL_SUM) {
      throw InvalidArgument(std::string("in_process got ") + reduction.name() + ", which it says it does not reduce natively");
    }
    Shared& s = shared();
    auto work = std::make_shared<DeadlineWork>(op, c, [shared = shared_, c](Work* self) { return timed_out(shared, self, c); });
    std::vector<Part> ready;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.failure) return refused(work, s);
      auto& parts = s.rounds[c.seq];
      parts.resize(static_cast<size_t>(size()));
      Part& mine = parts[static_cast<size_t>(rank())];
      mine = Part{op, out, in, reduction, root, std::move(out_counts), std::move(in_counts), c.fingerprint, work, true};
      s.last_collective[static_cast<size_t>(rank())] = c.fingerprint;
      s.last_finished[static_cast<size_t>(rank())] = false;
      if (std::all_of(parts.begin(), parts.end(), [](const Part& p) { return p.arrived; })) {
        ready = std::move(parts);
        s.rounds.erase(c.seq);
        for (size_t r = 0; r < s.last_finished.size(); ++r) s.last_finished[r] = true;
      }
    }
    if (!ready.empty()) {
      std::exception_ptr error;
      try {
        compute(ready);
      } catch (...) {
        error = std::current_exception();
      }
      for (Part& p : ready) end_op(*p.work, error);
      if (error) {
        // A Desync fails the group, as a real backend's does.
        std::vector<std::shared_ptr<Work>> to_end;
        {
          std::lock_guard<std::mutex> lock(s.mu);
          s.fail(error, &to_end);
        }
        end_all(to_end, s.refusal());
      }
    }
    return work;
  }

  std::vector<OpType> ops_;
  std::vector<OpType> list_ops_;
  std::shared_ptr<Shared> shared_;
  bool shut_down_ = false;
};

const distcomm_config_key kKeys[] = {
    {"in_process_ops", "all", nullptr, "the ops the backend lists, comma-separated op names, or all"},
    {"in_process_lists", "all_gather,gather,scatter,reduce_scatter,all_to_all", nullptr,
     "the ops whose list forms of device tensors it takes whole, comma-separated op names"},
    {nullptr, nullptr, nullptr, nullptr}};

int available(std::string*) { return 1; }
Backend* create(const BackendOptions& o) { return new InProcessBackend(o); }

}  // namespace

// Built twice: as "in_process" for cpu tensors and, with IN_PROCESS_SERVES_CUDA, as
// "in_process_cuda" for cuda tensors that hold host memory (the core's device paths).
#ifdef IN_PROCESS_SERVES_CUDA
DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG(kPluginName, "in_process test plugin", DISTCOMM_DEVICE_CUDA, 0, available, create,
                                   kKeys)
#else
DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG(kPluginName, "in_process test plugin", DISTCOMM_DEVICE_CPU, 0, available, create,
                                   kKeys)
#endif
