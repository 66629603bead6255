// ProcessGroup: the one API for collectives and point-to-point ops.
//
// It validates every argument before anything is sent (InvalidArgument naming the
// argument, the rank and what was expected), numbers each collective, routes each tensor
// to the backend of its device type ("cpu:gloo,cuda:nccl"), adapts list-shaped ops to the
// flat ops backends implement, and supplies AVG / PREMUL_SUM where a backend lacks them.
// Every op returns a Work at once; collectives on one group run in the order they were
// issued. Point-to-point ops are ordered among themselves, not behind the group's
// collectives: on gloo (as in c10d) a send or recv is posted when issued, even while an
// earlier collective of the group (a barrier another thread waits in) has not ended; mpi
// runs every op of a group in issue order. docs/backends.md, "Issue order".
// All ranks of a group must issue the same collectives in the same order.
//
// Ranks in arguments (root, dst, src) are ranks in this group.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/diagnostics/flight_recorder.h"
#include "api/group/backend_spec.h"
#include "api/group/host_exchange.h"
#include "api/group/process_group_options.h"
#include "api/options.h"
#include "api/plugin/backend.h"
#include "api/tensor.h"
#include "api/work.h"

namespace distcomm {

// The group's parts, each its own unit (ARCHITECTURE.md, "An op's path").
class ArgumentChecks;
class BackendCall;
struct CreationKeys;
class DetailChecks;
class GroupBackends;
class GroupCreation;
struct InitWait;
class MemberLists;
class OpNumbering;
class OpOverlaps;
struct OpSpec;
struct ReductionPlan;

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  // Creates the backends (a collective: every rank of the group calls it).
  static std::shared_ptr<ProcessGroup> create(ProcessGroupOptions options);
  // The same with options.backend parsed already (init_process_group parses it once); spec
  // must be BackendSpec::parse(options.backend) (InvalidArgument otherwise).
  static std::shared_ptr<ProcessGroup> create(ProcessGroupOptions options, BackendSpec spec);
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
  uint64_t next_seq() const;

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
  HostExchange& exchange() {
    refuse_if_fork_child("exchange");  // split, DeviceMesh, ordered_print and DDP use it
    return *exchange_;
  }

  // --- subgroups (collective over this group: every rank calls it, in the same order) ---
  // A group of the given ranks of this group; nullptr on ranks not in it.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks,
                                          const std::string& backend = "");
  // Ranks with the same color form a group, ordered by (key, rank); a negative color
  // means "no group" (nullptr), as MPI_UNDEFINED does.
  std::shared_ptr<ProcessGroup> split(int color, int key);
  // Several disjoint subgroups in one call (c10d's split_group): every rank passes the same
  // lists; a rank gets the group of the list it is in (its rank there is its position in
  // that list), nullptr when it is in none. Lists that differ between ranks, or are empty,
  // overlap or name a rank outside this group, are an InvalidArgument on every rank,
  // naming the rank that gave them, before any backend is made.
  std::shared_ptr<ProcessGroup> split_group(const std::vector<std::vector<int>>& split_ranks,
                                            const std::string& backend = "");

  // Fails what is in flight and stops the backends; later ops fail at once.
  void abort();

  // --- going on without dead ranks (process_group_shrink.cc) ---
  // The survivors' group: this group's ranks without `excluded` (ranks of this group that
  // are gone), renumbered in their order, over the same backend spec (resolved afresh:
  // "auto" may pick another backend for the survivors), made through the group's store. It
  // works on a failed or aborted group: nothing of the old backend is used (it may be why
  // the group failed), and the old group is left as it is (abort it first if an op of it
  // may still be waiting). Collective over the survivors: each calls it with the same list;
  // the list is part of the new group's name, so survivors that disagree never meet (their
  // creation times out naming whom it waited for). timeout: the creation's deadline; zero:
  // the group's timeout. InvalidArgument for a bad list (this rank in it, a rank twice or
  // outside the group, nobody left); Unsupported for a backend that meets its peers without
  // the store (mpi: MPI_COMM_WORLD cannot lose a rank without ULFM, which Open MPI 4.1 lacks).
  std::shared_ptr<ProcessGroup> shrink(const std::vector<int>& excluded,
                                       std::chrono::milliseconds timeout = std::chrono::milliseconds::zero());

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
  // create() and the subgroups: checks the options, then runs the creation (group_creation.h).
  // Subgroups skip the config check (they inherit their parent's config, which may hold
  // keys of backends they do not use); parent and members: a subgroup's parent and its
  // ranks there, whose backends it may reuse.
  // lists: new_group's (member_lists.h), for the creation's arrival.
  static std::shared_ptr<ProcessGroup> build(ProcessGroupOptions options, BackendSpec spec, bool check_config,
                                             ProcessGroup* parent = nullptr, const std::vector<int>& members = {},
                                             const MemberLists* lists = nullptr);
  // within: the creation whose deadline (and timeout, for messages) bounds this one's; null,
  // it counts from now (new_group's timeout). lists: new_group's, posted here by a rank
  // outside `ranks`.
  std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& ranks, const std::string& backend,
                                              const std::string& tag, const InitWait* within = nullptr,
                                              const MemberLists* lists = nullptr);
  // The name of this group's subgroup `tag` ("world/g0"). Under this group's name, and,
  // where this group is not the first creation of its name over its store ("pg/world/g0@2/":
  // one of the groups a new_group call with disjoint lists made, which share the name), with
  // that creation's number ("world/g0@2/s0c0"): subgroups of two such groups never share
  // a name, whose keys (rank claims, creation counts) would mix their members.
  std::string subgroup_name(const std::string& tag) const;
  // new_group on a rank that refused its list, or whose list its members refused: it makes
  // no group, but the backends of this one that would derive the subgroup's are told it is
  // left out (skip_subgroup), as the parent's ranks outside a list are, since a split over
  // this group (NCCL's) waits for every rank of it. A failed split is this group's failure,
  // which its backend has recorded; the refusal stays the error this rank reports.
  void leave_subgroup(const BackendSpec& spec);
  // A hierarchical group's levels (shm within its host, the across backend between hosts),
  // made during its creation, and the hierarchy wrapped around its CPU backend.
  void make_levels(const GroupCreation& creation);
  // Over the store, or, without one, over the CPU backend's all_gather (host_all_gather).
  void create_exchange();
  // The host exchange's check while it waits for the ranks `missing` gives (host_exchange.h,
  // asked only once a failure is found): throws a
  // PeerFailure when this group was aborted, or when the failure a rank published on one of
  // its backends' boards blames one of them.
  void raise_if_exchange_cannot_end(const std::function<std::vector<int>()>& missing) const;
  void host_all_gather(Tensor& out, const Tensor& in);
  // The recorder (unless turned off), registered for dumps (trace_dump.h).
  void create_recorder();
  // DISTCOMM_DEBUG=INFO and up: the group's creation (in rank order) and its op counts.
  void log_created();
  void log_destroyed() const;
  // One line, at any debug level, when the group is destroyed with ops of the program not
  // ended and the backends' shutdown cuts them off (the flight recorder says which).
  // The ops this rank issued that had not ended when the group began to go (warned of
  // after the backends' shutdown, if it did not let them end).
  std::vector<uint64_t> ops_not_ended() const;
  void warn_of_ops_cut_off(const std::vector<uint64_t>& not_ended_before) const;
  // The op pipeline (process_group_issue.cc): route -> plan -> (refused once aborted) ->
  // number -> record [DETAIL's checks [the backend's call]] -> AVG's division. Argument
  // checks come first, in each op.
  WorkPtr issue(const OpSpec& spec, const BackendCall& call);
  // batch_isend_irecv's ops with this rank itself (CPU tensors; `sends` and `recvs` index
  // them, in order): the k-th send pairs with the k-th recv, as NCCL takes them in a batch,
  // and is copied here. InvalidArgument, before anything is copied, when they do not pair.
  void pair_with_itself(std::vector<P2POp>& ops, const std::vector<size_t>& sends, const std::vector<size_t>& recvs,
                        const std::string& where) const;
  const PluginSearch& plugins() const { return options_.environment->plugins; }

  ProcessGroupOptions options_;  // environment: set by create(), inherited by subgroups
  BackendSpec spec_;             // parsed once; "auto (cpu: shm)" once chosen
  std::unique_ptr<ArgumentChecks> checks_;
  std::unique_ptr<OpNumbering> numbering_;
  // This group's keys in the store ("pg/<name>/", "pg/<name>@<n>/" for the n-th group of that
  // name over the same store, so that nothing an earlier one left is read as this one's).
  std::string store_prefix_;
  std::unique_ptr<GroupBackends> backends_;
  std::unique_ptr<HostExchange> exchange_;
  std::unique_ptr<DetailChecks> detail_;  // DISTCOMM_DEBUG=DETAIL only
  std::shared_ptr<FlightRecorder> recorder_;
  std::atomic<uint64_t> subgroups_{0};
  std::atomic<uint64_t> shrinks_{0};  // names the n-th shrink: the survivors count alike
  std::atomic<bool> aborted_{false};
  // The first Timeout, PeerFailure or Desync an op of this group ended with (whatever its
  // backend, the core's safety net included: work.h): later ops are refused at once,
  // quoting it (docs/failures.md), also where a backend would have run them. Shared with
  // each op's on_finish callback, which may run after the group is gone.
  struct CoreFailure {
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::exception_ptr first;
    void note(const std::exception_ptr& error);
  };
  std::shared_ptr<CoreFailure> core_failure_ = std::make_shared<CoreFailure>();
  // The group's backends and their numbers for Work::arm_core_deadline, set once its
  // backends are final (build()); a backend not here is looked up by name.
  std::array<std::pair<const Backend*, uint16_t>, 4> backend_names_{};
  uint16_t backend_name_id(const Backend& b) const;
  // issue()'s parts (process_group_issue.cc): a later op of a group that failed; the
  // backend's own call, refusing a null Work and giving what it throws the op's context.
  WorkPtr refused_since_failure(const OpContext& ctx) const;
  WorkPtr call_backend(const BackendCall& call, Backend& b, const ReductionPlan& plan, const OpContext& ctx);
  // A process forked after this group was made (fork_generation.h) inherits its memory but
  // is not its rank: every call that would reach its backends there is refused (what: the
  // call's "rank 1/2 group 'world' all_reduce"), and its destructor there leaves the
  // backends alone. Last in the class, so the members before keep their offsets.
  bool in_fork_child() const;
  [[noreturn]] void refuse_in_fork_child(const std::string& what) const;
  void refuse_if_fork_child(const char* what) const;
  // A call that makes subgroups over this group's host exchange (split, split_group, and a
  // DeviceMesh's own argument rounds: `call` names it) on a group this rank aborted: a
  // PeerFailure before anything else is sent, the call's round taken as "cannot take part"
  // so that the others waiting in it fail at once (process_group.cc).
  void refuse_subgroup_if_aborted(const std::string& call);
  friend class DeviceMesh;
  uint64_t made_in_fork_generation_ = 0;
  int64_t made_by_pid_ = 0;
  // The keys its creation left in the store, deleted by the last of its ranks to destroy
  // it (api/group/creation_keys.h); null where they stay: a group made by create() (the
  // world, whose store usually ends with it), one without a store. Last in the class.
  std::unique_ptr<CreationKeys> creation_keys_;
  // Issue order for the list forms (ops/op_overlaps.h): the group's ops in flight and what
  // they write, waited for where a list op packs or writes back over the same memory. Made
  // by a static function of process_group_issue.cc (a shared_ptr: its type stays incomplete
  // here). Last in the class, after the members above.
  static std::shared_ptr<OpOverlaps> make_overlaps();
  std::shared_ptr<OpOverlaps> overlaps_ = make_overlaps();
};

using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

}  // namespace distcomm
