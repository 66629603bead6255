// ProcessGroup: the one API for collectives and point-to-point ops.
//
// It validates every argument before anything is sent (InvalidArgument naming the
// argument, the rank and what was expected), numbers each collective, routes each tensor
// to the backend of its device type ("cpu:gloo,cuda:nccl"), adapts list-shaped ops to the
// flat ops backends implement, and supplies AVG / PREMUL_SUM where a backend lacks them.
// Every op returns a Work at once; ops on one group run in the order they were issued.
// All ranks of a group must issue the same collectives in the same order.
//
// Ranks in arguments (root, dst, src) are ranks in this group.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "api/plugin/backend.h"
#include "api/debug_level.h"
#include "api/diagnostics/flight_recorder.h"
#include "api/group/host_exchange.h"
#include "api/group/init_wait.h"
#include "api/options.h"
#include "api/group/process_environment.h"
#include "api/store/store.h"
#include "api/tensor.h"
#include "api/work.h"

namespace distcomm {

// "gloo" or "cpu:gloo,cuda:nccl": which backend serves which device type. "auto" (alone,
// or for cpu) chooses shm or gloo per group by where its ranks run (auto_backend.h).
struct BackendSpec {
  std::map<DeviceType, std::string> by_device;
  std::string text;  // as given, for messages
  static BackendSpec parse(const std::string& spec);
  // The plugins it names, each once ("auto": its candidates, found through `plugins`).
  std::vector<std::string> names(const PluginSearch& plugins) const;
};

struct ProcessGroupOptions {
  // The world's store, reached by every rank; the group works under its own prefix. Null
  // only for backends that find their peers by themselves (needs_store() is false, MPI):
  // their backends then get no store, and the group exchanges host messages through its
  // own collectives.
  StorePtr store;
  int rank = 0;
  int size = 1;
  std::string backend = "gloo";  // a BackendSpec
  std::chrono::milliseconds timeout = kDefaultGroupTimeout;
  std::string group_name = "world";
  std::vector<int> global_ranks;  // empty for the world group: 0..size-1
  // Settings of the group's backends (each plugin declares its keys, plugin.h); a key no
  // backend of the group declares is refused when the group is created.
  std::map<std::string, std::string> backend_config;
  // Where plugins are, and the trace settings (process_environment.h): init_process_group
  // sets them from its one read of the environment; unset, ProcessGroup::create (then the
  // program's edge) reads them. Subgroups inherit them.
  std::optional<ProcessEnvironment> environment;
  // What the group checks and logs beyond its default (debug_level.h); subgroups inherit it.
  DebugLevel debug = DebugLevel::kOff;
  // The deadline of the group's creation (init_wait.h): init_process_group sets it from its
  // own start, so that connecting to the store counts; unset (the default), creation counts
  // from its own start. Every phase of creation waits within it.
  std::chrono::steady_clock::time_point creation_deadline{};
  // How often a rank waiting at creation says whom it waits for.
  std::chrono::milliseconds creation_report_every = kDefaultInitReportInterval;
  // Where the store is, for messages ("tcp://10.0.0.1:29500").
  std::string store_text = "the group's store";
  // The rank whose process serves the store ("rank 0": init_process_group's TCPStore), for
  // when the store goes away under the group's creation or its host exchange: a PeerFailure
  // saying "rank 0 (which served the store) has exited or closed it" rather than the
  // store's error. Empty when no rank serves it (a FileStore, the program's own); subgroups
  // inherit it.
  std::string store_host;
};

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  // Creates the backends (a collective: every rank of the group calls it).
  static std::shared_ptr<ProcessGroup> create(ProcessGroupOptions options);
  // Whether a group of this backend spec needs a store shared by its ranks: false when
  // every backend in it finds its peers by itself (DISTCOMM_PLUGIN_SELF_RENDEZVOUS).
  static bool needs_store(const std::string& backend_spec, const PluginSearch& plugins);
  // The same, with PluginSearch::from_environment() (for tools and tests).
  static bool needs_store(const std::string& backend_spec);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  const std::string& name() const { return options_.group_name; }
  // The spec as given; "auto" says what it chose: "auto (cpu: shm)".
  std::string backend_name() const { return spec_.text; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  // The world's store (null for a group that has none, see ProcessGroupOptions::store).
  const StorePtr& store() const { return options_.store; }
  // World rank of a rank of this group.
  int global_rank(int group_rank) const;
  const std::vector<int>& global_ranks() const { return options_.global_ranks; }
  // Sequence number the next collective will get.
  uint64_t next_seq() const { return seq_.load(); }

  // --- collectives ---
  WorkPtr all_reduce(Tensor& tensor, const AllReduceOptions& opts = {});
  // Many tensors of one dtype and device in one reduction: host tensors packed into one
  // buffer; others coalesced by their backend where it can (nccl: one NCCL group).
  WorkPtr all_reduce_coalesced(std::vector<Tensor>& tensors, const AllReduceOptions& opts = {});
  WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts = {});
  // Result lands in root's tensor; other ranks' tensors are left unchanged.
  WorkPtr reduce(Tensor& tensor, const ReduceOptions& opts = {});
  // outputs: size() tensors shaped like input.
  WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input, const AllGatherOptions& opts = {});
  // output: size() * input.numel() elements.
  WorkPtr all_gather_into_tensor(Tensor& output, const Tensor& input, const AllGatherOptions& opts = {});
  // outputs: size() tensors on root, empty elsewhere.
  WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts = {});
  // inputs: size() tensors on root, empty elsewhere.
  WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts = {});
  // inputs: size() tensors shaped like output; rank r gets the reduction of inputs[r].
  WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                         const ReduceScatterOptions& opts = {});
  // input: size() * output.numel() elements.
  WorkPtr reduce_scatter_tensor(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts = {});
  // Split sizes count rows of dim 0, as in torch.distributed.all_to_all_single; empty
  // means equal splits (dim 0 divisible by size()).
  WorkPtr all_to_all_single(Tensor& output, const Tensor& input,
                            const std::vector<int64_t>& output_split_sizes = {},
                            const std::vector<int64_t>& input_split_sizes = {},
                            const AllToAllOptions& opts = {});
  // inputs[r] goes to rank r; outputs[r] comes from rank r. Sizes may differ per rank.
  WorkPtr all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                     const AllToAllOptions& opts = {});
  WorkPtr barrier(const BarrierOptions& opts = {});

  // --- point to point ---
  WorkPtr send(const Tensor& tensor, int dst, const P2POptions& opts = {});
  WorkPtr recv(Tensor& tensor, int src, const P2POptions& opts = {});
  // Work::source_rank() tells who sent it.
  WorkPtr recv_any_source(Tensor& tensor, const P2POptions& opts = {});
  // Sends and receives issued together, each tensor its own, as torch's batch_isend_irecv:
  // a ring (send to the next rank, receive from the previous) in one call cannot deadlock.
  // One Work for the batch. All tensors on one device type. The nccl backend runs the
  // batch as one grouped call on the group's communicator (the first batch sets it up if
  // no collective did: every rank of the group takes part then); other backends get the
  // ops one by one, in order.
  WorkPtr batch_isend_irecv(std::vector<P2POp>& ops, const P2POptions& opts = {});

  // Small host messages between the ranks of this group (host_exchange.h): what the core,
  // DDP and tools use to agree on anything outside the ops.
  HostExchange& exchange() { return *exchange_; }

  // --- subgroups (collective over this group: every rank calls it, in the same order) ---
  // A group of the given ranks of this group; nullptr on ranks not in it.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks,
                                          const std::string& backend = "");
  // Ranks with the same color form a group, ordered by (key, rank); a negative color
  // means "no group" (nullptr), as MPI_UNDEFINED does.
  std::shared_ptr<ProcessGroup> split(int color, int key);

  // Fails what is in flight and stops the backends; later ops fail at once.
  void abort();

  // The program is ending because of `error` (run_main calls it with what escaped the
  // program's body): every live group of this process that has a store publishes it as
  // the group's failure (group_failure.h), unless the group had one already, so that the
  // peers cut off by this process's exit report this error rather than a closed
  // connection; and a store this process serves stays a moment for them to read it
  // (internal/store_host.h).
  static void publish_program_failure(const std::exception_ptr& error);

  // The backend serving a device type (loading errors surface here).
  Backend& backend_for(DeviceType device);

  // This group's flight recorder (flight_recorder.h); null when DISTCOMM_TRACE_BUFFER=0.
  const std::shared_ptr<FlightRecorder>& recorder() const { return recorder_; }

 private:
  explicit ProcessGroup(ProcessGroupOptions options);
  // create(), where subgroups skip the config check: they inherit their parent's config,
  // which may hold keys of backends they do not use.
  // parent: the group a subgroup is made from (null otherwise), members: the subgroup's
  // ranks in the parent (create_subgroup_backend).
  static std::shared_ptr<ProcessGroup> build(ProcessGroupOptions options, bool check_config,
                                             ProcessGroup* parent = nullptr, const std::vector<int>& members = {});
  void create_backends(ProcessGroup* parent, const std::vector<int>& members, const InitWait& wait);
  // The deadline and reporting of this group's creation (from creation_deadline).
  InitWait creation_wait() const;
  // Creation's first and last steps over the store: every rank arrives (store_prefix_ is
  // chosen here), and, once its backends are made, says whether that worked, so that no
  // rank returns from creation while another is still failing it (init_wait.h).
  // arrive also points `wait` at the group's creation_failed key, once it knows the key.
  void arrive(InitWait& wait);
  void confirm_created(const InitWait& wait, const std::exception_ptr& failure);
  // A creation's failure as it is, unless it is the store's: then a PeerFailure naming the
  // rank that served the store (options_.store_host), which has gone.
  std::exception_ptr with_store_host(const std::exception_ptr& failure) const;
  // A backend's namespace in the store (its PrefixStore's prefix).
  std::string backend_store_prefix(DeviceType device, const std::string& backend) const;
  // Which device type each plugin of a spec serves ("auto" left as it is).
  static std::map<DeviceType, std::string> plan_of(const BackendSpec& spec, const PluginSearch& plugins);
  // This group's backends that a subgroup with backend spec `spec` would use again (the
  // same plugin for the same device type, of ABI minor 4 or later): each is asked for the
  // subgroup's backend (Backend::create_subgroup_backend), on every rank of this group.
  std::map<DeviceType, Backend*> parents_of_subgroup(const std::string& spec);
  // On a rank the subgroup leaves out: gives each of those backends its part.
  void skip_subgroup(const std::string& spec, const std::vector<int>& members);
  void create_exchange();
  // The CPU backend's all_gather, outside the op sequence's checks (the exchange's transport
  // when there is no shared store).
  void host_all_gather(Tensor& out, const Tensor& in);
  std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& ranks, const std::string& backend,
                                              const std::string& tag);

  // Validation helpers (process_group_checks.cc): throw InvalidArgument naming op, argument
  // and rank.
  std::string where(OpType op) const;
  void check_tensor(OpType op, const Tensor& t, const char* arg) const;
  void check_same(OpType op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) const;
  // Same dtype and device (the counts differ by design).
  void check_alike(OpType op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) const;
  // The tensor forms of all_gather and reduce_scatter: `whole` holds size() times `part`.
  void check_whole_and_part(OpType op, const Tensor& whole, const char* whole_name, const Tensor& part,
                            const char* part_name) const;
  // A list argument: one tensor per rank, each like `like`. For a rooted op (root >= 0) the
  // list is the root's and must be empty elsewhere. Returns whether this rank holds it.
  bool check_list(OpType op, const std::vector<Tensor>& list, const char* arg, const Tensor& like,
                  const char* like_name, int root = -1) const;
  void check_root(OpType op, int root) const;
  void check_peer(OpType op, int peer, const char* arg) const;
  // A point-to-point op's tensor, peer (peer_arg null: any source) and tag.
  void check_p2p(OpType op, const Tensor& t, const char* peer_arg, int peer, int tag) const;
  void check_reduce(OpType op, ReduceOp rop, const Tensor& t) const;
  void require_host(OpType op, const Tensor& t, const std::string& what) const;
  void check_count(OpType op, const Tensor& t, int64_t expected, const char* arg,
                   const std::string& why) const;

  // Which sequence an op is numbered in: the group's collectives, its point-to-point ops,
  // or the host exchange's own collectives (groups without a store).
  enum class OpKind { kCollective, kPointToPoint, kInternal };
  // Numbers the op, resolves its timeout, describes it and starts its fingerprint (op, seq,
  // the tensor's dtype, count and shape); callers add root, reduction and splits.
  OpContext next_context(OpType op, const Tensor* t, std::chrono::milliseconds timeout,
                         OpKind kind = OpKind::kCollective);
  // A send's or recv's context: its fingerprint names the peer (-1: any), tag and ordinal.
  OpContext p2p_context(OpType op, const Tensor& t, int peer, const P2POptions& opts);
  // The next transfer's number among this rank's sends (or recvs) with `peer` and `tag`: a
  // send and a recv pair up when their numbers agree (messages between two ranks with one
  // tag do not overtake each other).
  int64_t next_ordinal(bool is_send, int peer, int tag);
  static void with_reduction(OpContext& ctx, ReduceOp op);
  // DISTCOMM_DEBUG=DETAIL (process_group_debug.cc; nothing at other levels). A collective:
  // every rank's fingerprint through the host exchange, Desync with the table on every rank
  // when they differ. A send: its fingerprint posted on the store for the recv. Returns ctx.
  const OpContext& check_detail(const OpContext& ctx);
  // A recv: once it has ended, compares its fingerprint with the one its sender posted,
  // InvalidArgument naming both when they differ. A recv from any rank is compared once its
  // source is known, as that source's next transfer with this rank.
  WorkPtr checked_recv(const WorkPtr& work, const OpContext& ctx);
  // DISTCOMM_DEBUG=INFO and up: the group's creation (in rank order) and its op counts.
  void log_created();
  void log_destroyed() const;
  // A batch the backend runs natively (nccl): each send and recv in it checked as the single
  // ops are (call() hands the batch to the backend).
  WorkPtr checked_batch(const std::vector<P2POp>& ops, const P2POptions& opts, const OpContext& ctx,
                        const std::function<WorkPtr()>& call);
  bool detail_p2p_on() const;
  std::string detail_p2p_key(int src, int dst, const OpFingerprint& f) const;
  // DETAIL's point-to-point check: a send's fingerprint posted for its recv on the store;
  // a recv's (peer and ordinal known) compared with it, InvalidArgument naming both.
  void post_for_recv(const OpFingerprint& send);
  void compare_with_sent(const OpFingerprint& recv, const std::string& description, std::chrono::milliseconds timeout);
  // Hands the op to its backend (call() returns the backend's Work) and records it in the
  // flight recorder: issued now, ended when that Work ends.
  template <typename Call>
  WorkPtr recorded(const OpContext& ctx, Call&& call) {
    if (!recorder_) return call();
    const uint64_t id = recorder_->queued(ctx.fingerprint);
    WorkPtr work;
    try {
      work = call();
    } catch (...) {
      recorder_->failed_to_issue(id, std::current_exception());
      throw;
    }
    recorder_->watch(id, work);
    return work;
  }
  // Creates the recorder (unless turned off) once the backends exist, and registers it for
  // dumps (trace_dump.h).
  void create_recorder();
  // The backend of the device, once it lists op in supported_ops().
  Backend& route(OpType op, DeviceType device);
  Backend& route(OpType op, const Tensor& t) { return route(op, t.device().type); }

  // How a reducing op runs: what the backend is asked, and what the host does around it
  // when the backend lacks the op for the dtype (AVG: a SUM, then a division; PREMUL_SUM:
  // the inputs scaled, then a SUM). Host tensors only; others are refused.
  struct ReductionPlan {
    ReduceOp run;
    double premultiply_by = 1.0;
    int64_t divide_by = 1;
  };
  ReductionPlan plan_reduction(OpType op, Backend& b, ReduceOp requested, const Tensor& t) const;
  // all_reduce_coalesced of tensors that cannot be packed on the host (checked alike).
  WorkPtr coalesced_by_backend(std::vector<Tensor>& tensors, const AllReduceOptions& opts);
  // input scaled for the plan (itself when in_place, else a copy), or input as it is.
  static Tensor premultiplied(const ReductionPlan& plan, const Tensor& input, bool in_place);
  // work, followed by the plan's division of result.
  static WorkPtr divided_after(const ReductionPlan& plan, const WorkPtr& work, const Tensor& result);
  // The op's options with the reduction the backend is asked for.
  template <typename Options>
  static Options planned(Options opts, const ReductionPlan& plan) {
    opts.op = plan.run;
    return opts;
  }

  ProcessGroupOptions options_;  // environment: set by create(), inherited by subgroups
  const PluginSearch& plugins() const { return options_.environment->plugins; }
  const std::string where_prefix_;  // "rank 1/4 group 'world' "
  // This group's keys in the store: "pg/<name>/", or "pg/<name>@<n>/" for the n-th group
  // of that name over the same store (a group made again after destroy), so that nothing
  // an earlier one left (peers' addresses above all) is read as this one's.
  std::string store_prefix_;
  BackendSpec spec_;
  std::map<DeviceType, std::unique_ptr<Backend>> backends_;
  std::map<DeviceType, std::vector<OpType>> supported_ops_;  // asked once, not per op
  std::map<DeviceType, std::string> backend_errors_;  // backends that could not be created
  std::map<DeviceType, std::string> plugin_of_;       // the plugin of each backend
  std::map<DeviceType, uint32_t> abi_minor_;          // and its ABI minor (plugin.h)
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> p2p_seq_{0};
  // Ops the program issued on this rank, per type (not the group's own internal ones): what
  // DISTCOMM_DEBUG=INFO reports when the group is destroyed.
  std::array<std::atomic<uint64_t>, static_cast<size_t>(OpType::kBatchP2P) + 1> issued_{};
  std::atomic<uint64_t> exchange_seq_{0};
  // Point-to-point transfers so far per (is send, peer, tag): each one's ordinal.
  std::mutex ordinals_mu_;
  std::map<std::tuple<bool, int, int>, int64_t> transfers_;
  std::atomic<uint64_t> subgroups_{0};
  std::unique_ptr<HostExchange> exchange_;
  std::atomic<bool> aborted_{false};
  std::shared_ptr<FlightRecorder> recorder_;
};

using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

}  // namespace distcomm
