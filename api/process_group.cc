#include "api/process_group.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "api/errors.h"
#include "api/plugin_registry.h"
#include "api/prefix_store.h"

namespace distcomm {
namespace {

// Waiting for it waits for `inner` first, so that a backend whose waiters run their own op
// (gloo) does so for this Work's waiter too.
class ChainedWork : public Work {
 public:
  ChainedWork(WorkPtr inner, OpType op, const OpContext& ctx)
      : Work(op, ctx.seq, ctx.description), inner_(std::move(inner)) {}

  void wait(std::chrono::milliseconds timeout = kNoTimeout) override {
    if (!Work::is_completed()) {
      if (timeout < std::chrono::milliseconds::zero()) {
        try {
          inner_->wait();
        } catch (...) {
          // inner's error reaches this Work through the callback; Work::wait rethrows it
        }
      } else {
        inner_->is_completed();  // a poll: lets the backend start the op now
      }
    }
    Work::wait(timeout);
  }

  bool is_completed() const override {
    if (Work::is_completed()) return true;
    inner_->is_completed();
    return Work::is_completed();
  }

 private:
  const WorkPtr inner_;
};

// A Work that ends when `inner` ends, after `after` ran (on the thread that finished inner).
// Used to unpack list outputs and to finish host-side AVG after the backend's SUM.
WorkPtr then(const WorkPtr& inner, OpType op, const OpContext& ctx, std::function<void()> after) {
  auto outer = std::make_shared<ChainedWork>(inner, op, ctx);
  inner->on_finish([outer, after = std::move(after)](std::exception_ptr error) {
    if (!error) {
      try {
        after();
      } catch (...) {
        error = std::current_exception();
      }
    }
    outer->finish(error);
  });
  return outer;
}

// Copies tensors end to end into one flat host tensor.
Tensor pack(const std::vector<Tensor>& parts, DType dtype) {
  int64_t total = 0;
  for (const auto& p : parts) total += p.numel();
  Tensor flat = Tensor::empty({total}, dtype);
  int64_t offset = 0;
  for (const auto& p : parts) {
    flat.flat_slice(offset, p.numel()).copy_from(p.reshape({p.numel()}));
    offset += p.numel();
  }
  return flat;
}

void unpack(const Tensor& flat, std::vector<Tensor>& parts) {
  int64_t offset = 0;
  for (auto& p : parts) {
    p.reshape({p.numel()}).copy_from(flat.flat_slice(offset, p.numel()));
    offset += p.numel();
  }
}

std::string ranks_str(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace

// ---------------------------------------------------------------------------------------
// BackendSpec

BackendSpec BackendSpec::parse(const std::string& spec) {
  BackendSpec out;
  out.text = spec;
  if (spec.empty()) throw InvalidArgument("backend: empty name; expected e.g. 'gloo' or 'cpu:gloo,cuda:nccl'");
  if (spec.find(':') == std::string::npos) {
    if (spec.find(',') != std::string::npos) {
      throw InvalidArgument("backend '" + spec + "': a list needs device types, e.g. 'cpu:gloo,cuda:nccl'");
    }
    return out;  // one backend for every device it serves: resolved when the plugin is loaded
  }
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      throw InvalidArgument("backend '" + spec + "': '" + item + "' is not of the form device:backend");
    }
    const DeviceType dev = parse_device_type(item.substr(0, colon));
    if (!out.by_device.emplace(dev, item.substr(colon + 1)).second) {
      throw InvalidArgument("backend '" + spec + "': device '" + item.substr(0, colon) + "' given twice");
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Construction

ProcessGroup::ProcessGroup(ProcessGroupOptions options) : options_(std::move(options)) {}

std::vector<std::string> BackendSpec::names() const {
  if (by_device.empty()) return {text};
  std::vector<std::string> out;
  for (const auto& [device, name] : by_device) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(ProcessGroupOptions options) {
  return build(std::move(options), /*check_config=*/true);
}

std::shared_ptr<ProcessGroup> ProcessGroup::build(ProcessGroupOptions options, bool check_config) {
  if (options.size < 1) throw InvalidArgument("ProcessGroup: size must be >= 1, got " + std::to_string(options.size));
  if (options.rank < 0 || options.rank >= options.size) {
    throw InvalidArgument("ProcessGroup: rank " + std::to_string(options.rank) + " is outside [0, " +
                          std::to_string(options.size) + ")");
  }
  if (options.global_ranks.empty()) {
    options.global_ranks.resize(static_cast<size_t>(options.size));
    std::iota(options.global_ranks.begin(), options.global_ranks.end(), 0);
  }
  if (static_cast<int>(options.global_ranks.size()) != options.size) {
    throw InvalidArgument("ProcessGroup: global_ranks has " + std::to_string(options.global_ranks.size()) +
                          " entries for a group of " + std::to_string(options.size));
  }
  if (!options.store && needs_store(options.backend)) {
    throw InvalidArgument("ProcessGroup: backend '" + options.backend +
                          "' finds its peers through a store shared by every rank, and none was given");
  }
  std::shared_ptr<ProcessGroup> pg(new ProcessGroup(std::move(options)));
  pg->spec_ = BackendSpec::parse(pg->options_.backend);
  if (check_config) check_backend_config(pg->spec_.names(), pg->options_.backend_config);
  pg->create_backends();
  pg->create_exchange();
  return pg;
}

bool ProcessGroup::needs_store(const std::string& backend_spec) {
  for (const std::string& name : BackendSpec::parse(backend_spec).names()) {
    if (!(load_plugin(name).flags & DISTCOMM_PLUGIN_SELF_RENDEZVOUS)) return true;
  }
  return false;
}

void ProcessGroup::create_exchange() {
  HostExchangeOptions o;
  o.rank = rank();
  o.size = size();
  o.timeout = options_.timeout;
  o.where = "rank " + std::to_string(rank()) + "/" + std::to_string(size()) + " group '" + name() + "'";
  if (options_.store) {
    exchange_ = make_store_exchange(o, options_.store, "pg/" + name() + "/exchange/");
  } else {
    exchange_ = make_collective_exchange(o, [this](Tensor& out, const Tensor& in) { host_all_gather(out, in); });
  }
}

void ProcessGroup::host_all_gather(Tensor& out, const Tensor& in) {
  constexpr OpType kOp = OpType::kAllGather;
  Backend& b = route(kOp, in);
  OpContext ctx = next_context(kOp, &in, options_.timeout);
  ctx.description += " (host message exchange)";
  b.all_gather(out, in, AllGatherOptions(), ctx)->wait();
}

void ProcessGroup::create_backends() {
  std::map<DeviceType, std::string> plan = spec_.by_device;
  if (plan.empty()) {
    // One name: it serves every device type its plugin declares.
    const PluginInfo& info = load_plugin(spec_.text);
    if (info.devices & DISTCOMM_DEVICE_CPU) plan[DeviceType::kCPU] = spec_.text;
    if (info.devices & DISTCOMM_DEVICE_CUDA) plan[DeviceType::kCUDA] = spec_.text;
  }
  const bool several = plan.size() > 1;
  for (const auto& [device, name] : plan) {
    BackendOptions bo;
    if (options_.store) {
      bo.store = std::make_shared<PrefixStore>(
          "pg/" + options_.group_name + "/" + device_type_name(device) + "/" + name, options_.store);
    }
    bo.rank = options_.rank;
    bo.size = options_.size;
    bo.global_ranks = options_.global_ranks;
    bo.group_name = options_.group_name;
    bo.timeout = options_.timeout;
    bo.device = device;
    bo.config = options_.backend_config;
    try {
      backends_[device] = create_backend(name, bo);
      supported_ops_[device] = backends_[device]->supported_ops();
    } catch (const BackendUnavailable& e) {
      // In a mixed group ("cpu:gloo,cuda:nccl") a backend that cannot run here (no GPU)
      // fails the ops of its device only, as c10d's lazy backends do; alone, it fails now.
      if (!several) throw;
      backend_errors_[device] = e.what();
    }
  }
}

ProcessGroup::~ProcessGroup() {
  for (auto& [device, backend] : backends_) backend->shutdown();
}

void ProcessGroup::abort() {
  aborted_ = true;
  for (auto& [device, backend] : backends_) backend->shutdown();
}

int ProcessGroup::global_rank(int group_rank) const {
  if (group_rank < 0 || group_rank >= size()) {
    throw InvalidArgument("group '" + name() + "' has no rank " + std::to_string(group_rank));
  }
  return options_.global_ranks[static_cast<size_t>(group_rank)];
}

Backend& ProcessGroup::backend_for(DeviceType device) {
  auto it = backends_.find(device);
  if (it != backends_.end()) return *it->second;
  auto err = backend_errors_.find(device);
  if (err != backend_errors_.end()) throw BackendUnavailable(err->second);
  throw InvalidArgument("group '" + name() + "' (backend '" + spec_.text + "') has no backend for " +
                        device_type_name(device) + " tensors");
}

// ---------------------------------------------------------------------------------------
// Validation

std::string ProcessGroup::where(OpType op) const {
  return "rank " + std::to_string(rank()) + "/" + std::to_string(size()) + " group '" + name() + "' " +
         op_type_name(op);
}

void ProcessGroup::check_tensor(OpType op, const Tensor& t, const char* arg) const {
  if (!t.defined()) throw InvalidArgument(where(op) + ": argument '" + arg + "' is an undefined tensor");
  if (t.numel() > 0 && t.data() == nullptr) {
    throw InvalidArgument(where(op) + ": argument '" + arg + "' has no memory");
  }
}

void ProcessGroup::check_same(OpType op, const Tensor& a, const char* a_name, const Tensor& b,
                              const char* b_name) const {
  if (a.dtype() != b.dtype() || a.device() != b.device() || a.numel() != b.numel()) {
    throw InvalidArgument(where(op) + ": '" + a_name + "' is " + a.describe() + " but '" + b_name + "' is " +
                          b.describe() + "; they must match in dtype, device and number of elements");
  }
}

void ProcessGroup::check_root(OpType op, int root) const {
  if (root < 0 || root >= size()) {
    throw InvalidArgument(where(op) + ": root " + std::to_string(root) + " is outside the group's ranks [0, " +
                          std::to_string(size()) + ")");
  }
}

void ProcessGroup::check_peer(OpType op, int peer, const char* arg) const {
  if (peer < 0 || peer >= size()) {
    throw InvalidArgument(where(op) + ": " + arg + " " + std::to_string(peer) + " is outside [0, " +
                          std::to_string(size()) + ")");
  }
  if (peer == rank()) throw InvalidArgument(where(op) + ": " + arg + " is this rank itself (" + std::to_string(peer) + ")");
}

void ProcessGroup::check_reduce(OpType op, ReduceOp rop, const Tensor& t) const {
  std::string why;
  if (!reduce_supported(rop, t.dtype(), &why)) throw InvalidArgument(where(op) + ": " + why);
}

void ProcessGroup::require_host(OpType op, const Tensor& t, const std::string& what) const {
  if (!t.is_cpu()) {
    throw InvalidArgument(where(op) + ": " + what + " packs on the host and is not available for " +
                          t.device().str() + " tensors");
  }
}

void ProcessGroup::check_count(OpType op, const Tensor& t, int64_t expected, const char* arg,
                               const std::string& why) const {
  if (t.numel() != expected) {
    throw InvalidArgument(where(op) + ": '" + arg + "' has " + std::to_string(t.numel()) + " elements, expected " +
                          std::to_string(expected) + " (" + why + ")");
  }
}

OpContext ProcessGroup::next_context(OpType op, const Tensor* t, std::chrono::milliseconds timeout, bool p2p) {
  if (aborted_) throw PeerFailure(where(op) + ": the group was aborted; create a new group");
  OpContext ctx;
  ctx.seq = p2p ? p2p_seq_++ : seq_++;
  ctx.timeout = timeout < std::chrono::milliseconds::zero() ? options_.timeout : timeout;
  ctx.description = where(op) + (p2p ? " p2p#" : " #") + std::to_string(ctx.seq);
  if (t) ctx.description += " (" + t->describe() + ")";
  return ctx;
}

Backend& ProcessGroup::route(OpType op, const Tensor& t) {
  Backend* b = nullptr;
  try {
    b = &backend_for(t.device().type);
  } catch (const Error&) {
    std::rethrow_exception(with_context(std::current_exception(), where(op)));
  }
  const auto& ops = supported_ops_[t.device().type];
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
    throw Unsupported(where(op) + ": backend " + b->name() + " does not support " + op_type_name(op));
  }
  return *b;
}

ReduceOp ProcessGroup::effective_op(Backend& b, ReduceOp op, DType dtype) const {
  if (b.reduces_natively(op, dtype)) return op;
  if (op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM) return ReduceOp::SUM;
  return op;
}

void ProcessGroup::finish_reduction(ReduceOp requested, ReduceOp used, Tensor& result, int group_size) {
  if (requested.kind == ReduceOp::AVG && used.kind == ReduceOp::SUM) {
    divide_in_place(result.data(), static_cast<size_t>(result.numel()), result.dtype(), group_size);
  }
}

// ---------------------------------------------------------------------------------------
// Collectives

WorkPtr ProcessGroup::all_reduce(Tensor& tensor, const AllReduceOptions& opts) {
  constexpr OpType kOp = OpType::kAllReduce;
  check_tensor(kOp, tensor, "tensor");
  check_reduce(kOp, opts.op, tensor);
  Backend& b = route(kOp, tensor);
  AllReduceOptions run = opts;
  run.op = effective_op(b, opts.op, tensor.dtype());
  if (run.op.kind != opts.op.kind && !tensor.is_cpu()) {
    throw InvalidArgument(where(kOp) + ": backend " + b.name() + " has no " + opts.op.name() + " for " +
                          tensor.describe());
  }
  OpContext ctx = next_context(kOp, &tensor, opts.timeout);
  if (opts.op.kind == ReduceOp::PREMUL_SUM && run.op.kind == ReduceOp::SUM) {
    scale_in_place(tensor.data(), static_cast<size_t>(tensor.numel()), tensor.dtype(), opts.op.factor);
  }
  WorkPtr w = b.all_reduce(tensor, run, ctx);
  if (opts.op.kind != ReduceOp::AVG || run.op.kind == ReduceOp::AVG) return w;
  Tensor result = tensor;
  return then(w, kOp, ctx, [n = size(), opts, run, result]() mutable { finish_reduction(opts.op, run.op, result, n); });
}

WorkPtr ProcessGroup::all_reduce_coalesced(std::vector<Tensor>& tensors, const AllReduceOptions& opts) {
  constexpr OpType kOp = OpType::kAllReduceCoalesced;
  if (tensors.empty()) throw InvalidArgument(where(kOp) + ": 'tensors' is empty");
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(kOp, tensors[i], "tensors");
    if (tensors[i].dtype() != tensors[0].dtype() || tensors[i].device() != tensors[0].device()) {
      throw InvalidArgument(where(kOp) + ": tensors[" + std::to_string(i) + "] is " + tensors[i].describe() +
                            " but tensors[0] is " + tensors[0].describe() + "; all must share dtype and device");
    }
  }
  if (!tensors[0].is_cpu()) {
    throw InvalidArgument(where(kOp) + ": coalescing packs on the host; for " + tensors[0].device().str() +
                          " tensors issue one all_reduce per tensor");
  }
  // One flat buffer, one reduction: what DDP's buckets do, offered for any list of tensors.
  Tensor flat = pack(tensors, tensors[0].dtype());
  WorkPtr w = all_reduce(flat, opts);
  std::vector<Tensor> outs = tensors;
  OpContext ctx{w->seq(), std::chrono::milliseconds(0), w->description()};
  return then(w, kOp, ctx, [flat, outs]() mutable { unpack(flat, outs); });
}

WorkPtr ProcessGroup::broadcast(Tensor& tensor, const BroadcastOptions& opts) {
  constexpr OpType kOp = OpType::kBroadcast;
  check_tensor(kOp, tensor, "tensor");
  check_root(kOp, opts.root);
  Backend& b = route(kOp, tensor);
  return b.broadcast(tensor, opts, next_context(kOp, &tensor, opts.timeout));
}

WorkPtr ProcessGroup::reduce(Tensor& tensor, const ReduceOptions& opts) {
  constexpr OpType kOp = OpType::kReduce;
  check_tensor(kOp, tensor, "tensor");
  check_root(kOp, opts.root);
  check_reduce(kOp, opts.op, tensor);
  Backend& b = route(kOp, tensor);
  ReduceOptions run = opts;
  run.op = effective_op(b, opts.op, tensor.dtype());
  if (run.op.kind != opts.op.kind && !tensor.is_cpu()) {
    throw InvalidArgument(where(kOp) + ": backend " + b.name() + " has no " + opts.op.name() + " for " +
                          tensor.describe());
  }
  OpContext ctx = next_context(kOp, &tensor, opts.timeout);
  Tensor input = tensor;
  if (opts.op.kind == ReduceOp::PREMUL_SUM && run.op.kind == ReduceOp::SUM) {
    // Scale a copy off the root: reduce leaves non-root tensors unchanged.
    if (rank() != opts.root) input = tensor.clone();
    scale_in_place(input.data(), static_cast<size_t>(input.numel()), input.dtype(), opts.op.factor);
  }
  WorkPtr w = b.reduce(input, run, ctx);
  if (opts.op.kind != ReduceOp::AVG || run.op.kind == ReduceOp::AVG || rank() != opts.root) return w;
  return then(w, kOp, ctx, [n = size(), opts, run, input]() mutable { finish_reduction(opts.op, run.op, input, n); });
}

WorkPtr ProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input, const AllGatherOptions& opts) {
  constexpr OpType kOp = OpType::kAllGather;
  check_tensor(kOp, input, "input");
  check_tensor(kOp, output, "output");
  if (output.dtype() != input.dtype() || output.device() != input.device()) {
    throw InvalidArgument(where(kOp) + ": output is " + output.describe() + ", input is " + input.describe());
  }
  check_count(kOp, output, input.numel() * size(), "output", "size() * input.numel()");
  Backend& b = route(kOp, input);
  return b.all_gather(output, input, opts, next_context(kOp, &input, opts.timeout));
}

WorkPtr ProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input, const AllGatherOptions& opts) {
  constexpr OpType kOp = OpType::kAllGather;
  check_tensor(kOp, input, "input");
  if (static_cast<int>(outputs.size()) != size()) {
    throw InvalidArgument(where(kOp) + ": 'outputs' has " + std::to_string(outputs.size()) +
                          " tensors, expected one per rank (" + std::to_string(size()) + ")");
  }
  for (auto& o : outputs) check_same(kOp, o, "outputs[i]", input, "input");
  require_host(kOp, input, "the list form of all_gather; use all_gather_into_tensor");
  Tensor flat = Tensor::empty({input.numel() * size()}, input.dtype());
  WorkPtr w = all_gather_into_tensor(flat, input, opts);
  OpContext ctx{w->seq(), std::chrono::milliseconds(0), w->description()};
  std::vector<Tensor> outs = outputs;
  return then(w, kOp, ctx, [flat, outs]() mutable { unpack(flat, outs); });
}

WorkPtr ProcessGroup::gather(std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts) {
  constexpr OpType kOp = OpType::kGather;
  check_tensor(kOp, input, "input");
  check_root(kOp, opts.root);
  // Checked on every rank, not just the root: a root that refused alone would leave the
  // others waiting for it until the timeout.
  require_host(kOp, input, "gather into a list");
  const bool root = rank() == opts.root;
  Tensor flat;
  if (root) {
    if (static_cast<int>(outputs.size()) != size()) {
      throw InvalidArgument(where(kOp) + ": on the root, 'outputs' must hold one tensor per rank (" +
                            std::to_string(size()) + "), got " + std::to_string(outputs.size()));
    }
    for (auto& o : outputs) check_same(kOp, o, "outputs[i]", input, "input");
    flat = Tensor::empty({input.numel() * size()}, input.dtype());
  } else if (!outputs.empty()) {
    throw InvalidArgument(where(kOp) + ": 'outputs' must be empty on non-root ranks (root is " +
                          std::to_string(opts.root) + ")");
  }
  Backend& b = route(kOp, input);
  OpContext ctx = next_context(kOp, &input, opts.timeout);
  WorkPtr w = b.gather(flat, input, opts, ctx);
  if (!root) return w;
  std::vector<Tensor> outs = outputs;
  return then(w, kOp, ctx, [flat, outs]() mutable { unpack(flat, outs); });
}

WorkPtr ProcessGroup::scatter(Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts) {
  constexpr OpType kOp = OpType::kScatter;
  check_tensor(kOp, output, "output");
  check_root(kOp, opts.root);
  require_host(kOp, output, "scatter from a list");  // on every rank, as in gather
  Tensor flat;
  if (rank() == opts.root) {
    if (static_cast<int>(inputs.size()) != size()) {
      throw InvalidArgument(where(kOp) + ": on the root, 'inputs' must hold one tensor per rank (" +
                            std::to_string(size()) + "), got " + std::to_string(inputs.size()));
    }
    for (auto& i : inputs) check_same(kOp, i, "inputs[i]", output, "output");
    flat = pack(inputs, output.dtype());
  } else if (!inputs.empty()) {
    throw InvalidArgument(where(kOp) + ": 'inputs' must be empty on non-root ranks (root is " +
                          std::to_string(opts.root) + ")");
  }
  Backend& b = route(kOp, output);
  return b.scatter(output, flat, opts, next_context(kOp, &output, opts.timeout));
}

WorkPtr ProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts) {
  constexpr OpType kOp = OpType::kReduceScatter;
  check_tensor(kOp, output, "output");
  check_tensor(kOp, input, "input");
  if (output.dtype() != input.dtype() || output.device() != input.device()) {
    throw InvalidArgument(where(kOp) + ": output is " + output.describe() + ", input is " + input.describe());
  }
  check_count(kOp, input, output.numel() * size(), "input", "size() * output.numel()");
  check_reduce(kOp, opts.op, output);
  Backend& b = route(kOp, output);
  ReduceScatterOptions run = opts;
  run.op = effective_op(b, opts.op, output.dtype());
  if (run.op.kind != opts.op.kind && !output.is_cpu()) {
    throw InvalidArgument(where(kOp) + ": backend " + b.name() + " has no " + opts.op.name() + " for " +
                          output.describe());
  }
  OpContext ctx = next_context(kOp, &output, opts.timeout);
  Tensor in = input;
  if (opts.op.kind == ReduceOp::PREMUL_SUM && run.op.kind == ReduceOp::SUM) {
    in = input.clone();  // the input is the caller's: scale a copy
    scale_in_place(in.data(), static_cast<size_t>(in.numel()), in.dtype(), opts.op.factor);
  }
  WorkPtr w = b.reduce_scatter(output, in, run, ctx);
  if (opts.op.kind != ReduceOp::AVG || run.op.kind == ReduceOp::AVG) return w;
  Tensor result = output;
  return then(w, kOp, ctx, [n = size(), opts, run, result]() mutable { finish_reduction(opts.op, run.op, result, n); });
}

WorkPtr ProcessGroup::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                     const ReduceScatterOptions& opts) {
  constexpr OpType kOp = OpType::kReduceScatter;
  check_tensor(kOp, output, "output");
  if (static_cast<int>(inputs.size()) != size()) {
    throw InvalidArgument(where(kOp) + ": 'inputs' has " + std::to_string(inputs.size()) +
                          " tensors, expected one per rank (" + std::to_string(size()) + ")");
  }
  for (auto& i : inputs) check_same(kOp, i, "inputs[i]", output, "output");
  require_host(kOp, output, "the list form of reduce_scatter; use reduce_scatter_tensor");
  Tensor flat = pack(inputs, output.dtype());
  return reduce_scatter_tensor(output, flat, opts);
}

WorkPtr ProcessGroup::all_to_all_single(Tensor& output, const Tensor& input,
                                        const std::vector<int64_t>& output_split_sizes,
                                        const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) {
  constexpr OpType kOp = OpType::kAllToAll;
  check_tensor(kOp, output, "output");
  check_tensor(kOp, input, "input");
  if (output.dtype() != input.dtype() || output.device() != input.device()) {
    throw InvalidArgument(where(kOp) + ": output is " + output.describe() + ", input is " + input.describe());
  }
  // Split sizes count rows of dim 0; the backend gets element counts.
  auto counts = [&](const Tensor& t, const std::vector<int64_t>& splits, const char* arg) {
    const int64_t rows = t.dim() == 0 ? 1 : t.shape()[0];
    const int64_t row = rows == 0 ? 0 : t.numel() / rows;
    std::vector<int64_t> c(static_cast<size_t>(size()));
    if (splits.empty()) {
      if (rows % size() != 0) {
        throw InvalidArgument(where(kOp) + ": '" + arg + "' has " + std::to_string(rows) +
                              " rows, not divisible by the group size " + std::to_string(size()) +
                              "; pass split sizes");
      }
      std::fill(c.begin(), c.end(), rows / size() * row);
      return c;
    }
    if (static_cast<int>(splits.size()) != size()) {
      throw InvalidArgument(where(kOp) + ": " + arg + " split sizes has " + std::to_string(splits.size()) +
                            " entries, expected " + std::to_string(size()));
    }
    int64_t total = 0;
    for (size_t r = 0; r < splits.size(); ++r) {
      if (splits[r] < 0) throw InvalidArgument(where(kOp) + ": " + arg + " split size " + std::to_string(r) + " is negative");
      total += splits[r];
      c[r] = splits[r] * row;
    }
    if (total != rows) {
      throw InvalidArgument(where(kOp) + ": " + arg + " split sizes add up to " + std::to_string(total) +
                            " rows but the tensor has " + std::to_string(rows));
    }
    return c;
  };
  const auto out_counts = counts(output, output_split_sizes, "output");
  const auto in_counts = counts(input, input_split_sizes, "input");
  // The one pairing visible locally: what this rank sends itself must fit what it expects
  // from itself. (Mismatches between two ranks surface as a failed op on both.)
  const auto me = static_cast<size_t>(rank());
  if (in_counts[me] != out_counts[me]) {
    throw InvalidArgument(where(kOp) + ": this rank sends itself " + std::to_string(in_counts[me]) +
                          " elements but expects " + std::to_string(out_counts[me]) +
                          " from itself; input split " + std::to_string(rank()) + " must equal output split " +
                          std::to_string(rank()));
  }
  Backend& b = route(kOp, input);
  return b.all_to_all(output, input, out_counts, in_counts, opts, next_context(kOp, &input, opts.timeout));
}

WorkPtr ProcessGroup::all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                 const AllToAllOptions& opts) {
  constexpr OpType kOp = OpType::kAllToAll;
  if (static_cast<int>(outputs.size()) != size() || static_cast<int>(inputs.size()) != size()) {
    throw InvalidArgument(where(kOp) + ": 'outputs' and 'inputs' need one tensor per rank (" +
                          std::to_string(size()) + "), got " + std::to_string(outputs.size()) + " and " +
                          std::to_string(inputs.size()));
  }
  std::vector<int64_t> out_counts, in_counts;
  for (int r = 0; r < size(); ++r) {
    check_tensor(kOp, outputs[r], "outputs[r]");
    check_tensor(kOp, inputs[r], "inputs[r]");
    if (outputs[r].dtype() != inputs[0].dtype() || inputs[r].dtype() != inputs[0].dtype()) {
      throw InvalidArgument(where(kOp) + ": all tensors must share one dtype (" + dtype_name(inputs[0].dtype()) + ")");
    }
    out_counts.push_back(outputs[r].numel());
    in_counts.push_back(inputs[r].numel());
  }
  require_host(kOp, inputs[0], "the list form of all_to_all; use all_to_all_single");
  Tensor in = pack(inputs, inputs[0].dtype());
  Tensor out = Tensor::empty({std::accumulate(out_counts.begin(), out_counts.end(), int64_t{0})}, inputs[0].dtype());
  Backend& b = route(kOp, in);
  OpContext ctx = next_context(kOp, &in, opts.timeout);
  WorkPtr w = b.all_to_all(out, in, out_counts, in_counts, opts, ctx);
  std::vector<Tensor> outs = outputs;
  return then(w, kOp, ctx, [out, outs]() mutable { unpack(out, outs); });
}

WorkPtr ProcessGroup::barrier(const BarrierOptions& opts) {
  constexpr OpType kOp = OpType::kBarrier;
  // Any backend of the group synchronises all its ranks; prefer the host one.
  if (backends_.empty()) {
    Tensor none = Tensor::empty({0});
    route(kOp, none);  // raises the deferred backend error
  }
  Backend& b = *backends_.begin()->second;
  return b.barrier(opts, next_context(kOp, nullptr, opts.timeout));
}

// ---------------------------------------------------------------------------------------
// Point to point

WorkPtr ProcessGroup::send(const Tensor& tensor, int dst, const P2POptions& opts) {
  constexpr OpType kOp = OpType::kSend;
  check_tensor(kOp, tensor, "tensor");
  check_peer(kOp, dst, "dst");
  if (opts.tag < 0) throw InvalidArgument(where(kOp) + ": tag must be >= 0, got " + std::to_string(opts.tag));
  Backend& b = route(kOp, tensor);
  return b.send(tensor, dst, opts, next_context(kOp, &tensor, opts.timeout, true));
}

WorkPtr ProcessGroup::recv(Tensor& tensor, int src, const P2POptions& opts) {
  constexpr OpType kOp = OpType::kRecv;
  check_tensor(kOp, tensor, "tensor");
  check_peer(kOp, src, "src");
  if (opts.tag < 0) throw InvalidArgument(where(kOp) + ": tag must be >= 0, got " + std::to_string(opts.tag));
  Backend& b = route(kOp, tensor);
  return b.recv(tensor, src, opts, next_context(kOp, &tensor, opts.timeout, true));
}

WorkPtr ProcessGroup::recv_any_source(Tensor& tensor, const P2POptions& opts) {
  constexpr OpType kOp = OpType::kRecvAnySource;
  check_tensor(kOp, tensor, "tensor");
  if (size() < 2) throw InvalidArgument(where(kOp) + ": a group of one has no other rank to receive from");
  if (opts.tag < 0) throw InvalidArgument(where(kOp) + ": tag must be >= 0, got " + std::to_string(opts.tag));
  Backend& b = route(kOp, tensor);
  return b.recv_any_source(tensor, opts, next_context(kOp, &tensor, opts.timeout, true));
}

// ---------------------------------------------------------------------------------------
// Subgroups

std::shared_ptr<ProcessGroup> ProcessGroup::make_subgroup(const std::vector<int>& ranks, const std::string& backend,
                                                          const std::string& tag) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank());
  if (me == ranks.end()) return nullptr;
  ProcessGroupOptions o = options_;
  o.rank = static_cast<int>(me - ranks.begin());
  o.size = static_cast<int>(ranks.size());
  o.group_name = name() + "/" + tag;
  o.backend = backend.empty() ? options_.backend : backend;
  o.global_ranks.clear();
  for (int r : ranks) o.global_ranks.push_back(global_rank(r));
  return build(std::move(o), /*check_config=*/false);
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks, const std::string& backend) {
  // Counted on every rank, member or not, so all ranks agree on the next group's name.
  const uint64_t id = subgroups_++;
  if (ranks.empty()) throw InvalidArgument("new_group on group '" + name() + "': 'ranks' is empty");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= size()) {
      throw InvalidArgument("new_group on group '" + name() + "': rank " + std::to_string(sorted[i]) +
                            " is outside [0, " + std::to_string(size()) + ")");
    }
    if (i && sorted[i] == sorted[i - 1]) {
      throw InvalidArgument("new_group on group '" + name() + "': rank " + std::to_string(sorted[i]) +
                            " is listed twice in " + ranks_str(ranks));
    }
  }
  return make_subgroup(sorted, backend, "g" + std::to_string(id));
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
  const uint64_t id = subgroups_++;
  // One round: everyone learns everyone's (color, key).
  const auto all = exchange().all_gather(std::to_string(color) + " " + std::to_string(key));
  if (color < 0) return nullptr;
  std::vector<std::pair<int, int>> members;  // (key, rank) of my color
  for (int r = 0; r < size(); ++r) {
    std::istringstream in(all[static_cast<size_t>(r)]);
    int c = 0, k = 0;
    in >> c >> k;
    if (c == color) members.emplace_back(k, r);
  }
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (auto& m : members) ranks.push_back(m.second);
  return make_subgroup(ranks, "", "s" + std::to_string(id) + "c" + std::to_string(color));
}

}  // namespace distcomm
