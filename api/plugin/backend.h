// Backend: what a plugin implements. One Backend serves one group on one device type.
//
// The ProcessGroup has already validated every argument (shapes, dtypes, roots, ranks,
// op/dtype pairs), assigned the sequence number and resolved the timeout before it calls
// a Backend, so a backend only moves and reduces bytes. Tensors are flat and contiguous:
// list-shaped ops (all_gather into a list, scatter from a list, ...) are packed into one
// tensor by the ProcessGroup. Each op returns a Work at once and finishes it later, from
// the backend's own thread or stream, in issue order within the group.
//
// Every op has a default that throws Unsupported("backend X does not support Y"), so a
// plugin implements what its library can do and says so in supported_ops(); the
// ProcessGroup calls no op a backend does not list. Ops are added without breaking built
// plugins by the rules in plugin.h.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/device.h"
#include "api/diagnostics/op_fingerprint.h"
#include "api/options.h"
#include "api/store/store.h"
#include "api/tensor.h"
#include "api/work.h"

namespace distcomm {

struct BackendOptions {
  // Private to this group and backend (already prefixed), shared by the group's ranks. Null
  // when the group has no shared store: only for plugins that find their peers by
  // themselves (DISTCOMM_PLUGIN_SELF_RENDEZVOUS).
  StorePtr store;
  int rank = 0;                // rank in the group
  int size = 1;                // group size
  std::vector<int> global_ranks;  // global_ranks[group rank] = rank in the world group
  std::string group_name = "world";
  std::chrono::milliseconds timeout = kDefaultGroupTimeout;
  DeviceType device = DeviceType::kCPU;
  // Backend settings, filled at the edge (init_process_group, from the program and the
  // environment). The plugin's descriptor declares the keys it reads (plugin.h); the keys
  // init sets for every backend are plugin_registry.h's core_config_keys().
  std::map<std::string, std::string> config;
};

// One send or receive of a batch (ProcessGroup::batch_isend_irecv).
struct P2POp {
  enum class Kind : uint8_t { kSend, kRecv };
  Kind kind = Kind::kSend;
  Tensor tensor;  // sent from, or received into
  int peer = -1;  // rank in the group
  static P2POp send(const Tensor& tensor, int dst) { return {Kind::kSend, tensor, dst}; }
  static P2POp recv(const Tensor& tensor, int src) { return {Kind::kRecv, tensor, src}; }
};

// What the ProcessGroup passes with each op. Fields are only ever appended (plugin.h).
struct OpContext {
  uint64_t seq = 0;
  std::chrono::milliseconds timeout{0};  // resolved: never kUseDefault
  std::string description;  // "rank 1/4 group 'world' all_reduce #12 (float32[1000] on cpu)"
  // ABI 1.3 (read it only where core_abi_minor() >= 3, plugin.h): what this rank says the
  // op is, for backends to keep ops that ranks disagree on from moving bytes.
  OpFingerprint fingerprint;
};

class Backend {
 public:
  explicit Backend(BackendOptions options);
  virtual ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string name() const = 0;
  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  const BackendOptions& options() const { return options_; }

  // Capability queries. The ProcessGroup refuses an op not listed here before sending.
  // Ops the ProcessGroup builds from others are not listed (all_reduce_coalesced is an
  // all_reduce of a packed buffer).
  virtual std::vector<OpType> supported_ops() const = 0;
  // Whether the backend reduces (op, dtype) itself. When false for AVG or PREMUL_SUM, the
  // ProcessGroup runs SUM and does the scaling on the host (CPU tensors).
  virtual bool reduces_natively(ReduceOp op, DType dtype) const;

  virtual WorkPtr all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx);
  virtual WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts, const OpContext& ctx);
  // Result on root only; other ranks' tensors are inputs and must be left unchanged.
  virtual WorkPtr reduce(Tensor& tensor, const ReduceOptions& opts, const OpContext& ctx);
  // output holds size() * input.numel() elements, rank r's input at offset r * input.numel().
  virtual WorkPtr all_gather(Tensor& output, const Tensor& input, const AllGatherOptions& opts,
                             const OpContext& ctx);
  // Like all_gather, into output on root only (undefined Tensor elsewhere).
  virtual WorkPtr gather(Tensor& output, const Tensor& input, const GatherOptions& opts,
                         const OpContext& ctx);
  // root's input holds size() * output.numel() elements (undefined Tensor elsewhere).
  virtual WorkPtr scatter(Tensor& output, const Tensor& input, const ScatterOptions& opts,
                          const OpContext& ctx);
  // input holds size() * output.numel() elements; rank r gets the reduction of block r.
  virtual WorkPtr reduce_scatter(Tensor& output, const Tensor& input,
                                 const ReduceScatterOptions& opts, const OpContext& ctx);
  // Element counts: input block for rank r is input_counts[r] elements (in rank order),
  // output block from rank r is output_counts[r] elements. Equal splits are just equal counts.
  virtual WorkPtr all_to_all(Tensor& output, const Tensor& input,
                             const std::vector<int64_t>& output_counts,
                             const std::vector<int64_t>& input_counts, const AllToAllOptions& opts,
                             const OpContext& ctx);
  virtual WorkPtr barrier(const BarrierOptions& opts, const OpContext& ctx);
  virtual WorkPtr send(const Tensor& tensor, int dst, const P2POptions& opts, const OpContext& ctx);
  virtual WorkPtr recv(Tensor& tensor, int src, const P2POptions& opts, const OpContext& ctx);
  // Completes with Work::source_rank() set to the sender.
  virtual WorkPtr recv_any_source(Tensor& tensor, const P2POptions& opts, const OpContext& ctx);

  // Stops the backend's threads and fails what is in flight (never waits on peers; a
  // backend may give ops already queued a bounded time to end first). Called by the
  // ProcessGroup's destructor, when the group's creation fails after this backend was made
  // (another of its backends, or a rank, failed), and by its abort() for plugins older than
  // ABI minor 4 (see abort() below); must be idempotent, also after abort().
  virtual void shutdown() {}

  // Appended in ABI minor 2: only called where supported_ops() lists
  // kBatchP2P, so plugins built before it are never asked.
  // Sends and receives that progress together (one NCCL group), each tensor its own: a
  // ring (send to the next rank, receive from the previous) cannot deadlock. One Work for
  // the batch. All tensors are on this backend's device type; peers differ from rank().
  virtual WorkPtr batch_p2p(std::vector<P2POp>& ops, const P2POptions& opts, const OpContext& ctx);

  // Appended in ABI minor 4: the core calls these only on plugins of minor 4 or later.

  // ProcessGroup::abort(): as shutdown(), except that nothing in flight is given time to
  // end. A backend whose shutdown() lets ops already queued finish (a clean destroy) must
  // not wait for them here. Default: shutdown().
  virtual void abort();

  // A subgroup of this group (new_group, split) is being made, whose backend for this
  // backend's device type is the same plugin. Called on every rank of this group, member
  // of the subgroup or not, in the same order on each (both are collective over this
  // group), where the subgroup's backend for this device type would be created.
  // members: the subgroup's ranks as ranks of this group (subgroup rank i is members[i]);
  // empty on a rank that split() leaves out, and on a rank whose new_group list was
  // refused (by itself or its members: it makes no group, but a split still waits for it).
  // options: the subgroup's on its members, nullptr elsewhere. Returns the subgroup's backend, made from this one's resources
  // (NCCL: ncclCommSplit of this group's communicator), which the core owns; or nullptr,
  // and the core creates it through the plugin's create(). Returns nullptr where options
  // is nullptr. Every rank must decide alike, on state the ranks share. Default: nullptr.
  virtual Backend* create_subgroup_backend(const BackendOptions* options, const std::vector<int>& members);

  // Appended in ABI minor 5: called only on plugins of minor 5 or later that list
  // kAllReduceCoalesced in supported_ops(). all_reduce of every tensor (one dtype, one
  // device) as one op and one Work, for tensors the ProcessGroup cannot pack into one on
  // the host (CUDA): NCCL runs them in one group. Host tensors never come here.
  virtual WorkPtr all_reduce_coalesced(std::vector<Tensor>& tensors, const AllReduceOptions& opts,
                                       const OpContext& ctx);

  // Appended in ABI minor 6: the list forms of all_gather, gather, scatter, reduce_scatter
  // and all_to_all whole, for tensors the ProcessGroup cannot pack on the host (CUDA): NCCL
  // moves each rank's block straight between the callers' tensors. The core asks list_ops()
  // only of plugins of minor 6 or later, once per group, and calls a list virtual only for
  // an op it names. The core has checked the lists: one tensor per rank (the root's only,
  // for gather and scatter: empty elsewhere), each with the dtype, device and count of the
  // single tensor (all_to_all: one dtype and device, any counts). Host tensors never come
  // here. Default: no ops, and the virtuals throw Unsupported.
  virtual std::vector<OpType> list_ops() const;
  virtual WorkPtr all_gather_list(std::vector<Tensor>& outputs, const Tensor& input, const AllGatherOptions& opts,
                                  const OpContext& ctx);
  virtual WorkPtr gather_list(std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts,
                              const OpContext& ctx);
  virtual WorkPtr scatter_list(Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts,
                               const OpContext& ctx);
  // Rank r gets the reduction of every rank's inputs[r].
  virtual WorkPtr reduce_scatter_list(Tensor& output, const std::vector<Tensor>& inputs,
                                      const ReduceScatterOptions& opts, const OpContext& ctx);
  // inputs[r] goes to rank r, outputs[r] comes from rank r.
  virtual WorkPtr all_to_all_list(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                  const AllToAllOptions& opts, const OpContext& ctx);

 protected:
  // "backend gloo does not support recv_any_source"
  [[noreturn]] void unsupported(OpType op) const;

 private:
  BackendOptions options_;
};

}  // namespace distcomm
