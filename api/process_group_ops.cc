// ProcessGroup: the collectives and point-to-point ops. Each op checks its arguments, adapts
// a list form to the flat op backends implement (pack, op, unpack; or, where the list's
// tensors lie end to end, the op over their own memory), describes itself in an OpSpec and
// hands that to issue() (process_group_issue.cc) with the call to its backend; issue() does
// the rest, the same way for every op.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "api/errors.h"
#include "api/errors_internal.h"
#include "api/group/group_backends.h"
#include "api/ops/argument_checks.h"
#include "api/ops/backend_call.h"
#include "api/ops/detail_checks.h"
#include "api/ops/op_numbering.h"
#include "api/ops/op_overlaps.h"
#include "api/ops/op_spec.h"
#include "api/ops/scratch_pool.h"
#include "api/process_group.h"

namespace distcomm {
namespace {

// Copies tensors end to end into one flat host tensor (of the scratch pool).
Tensor pack(const std::vector<Tensor>& parts, DType dtype) {
  int64_t total = 0;
  for (const auto& p : parts) total += p.numel();
  Tensor flat = pooled_tensor(total, dtype);
  int64_t offset = 0;
  for (const auto& p : parts) {
    flat.flat_slice(offset, p.numel()).copy_from(p.reshape({p.numel()}));
    offset += p.numel();
  }
  return flat;
}

// parts as one flat tensor over their own memory, when they lie end to end in it (views of
// one buffer, as a caller that splits a tensor into a list makes them): the list form then
// needs no packed copy. Packing costs a fresh buffer per op, and on hosts whose first touch
// of a page is expensive (a paravirtualised VM: ~20 us a page) that was most of the op's
// time: a 1 MiB gather over shm took 5.5 ms packed, 0.07 ms in place. Undefined otherwise,
// and also where `other` (the op's other tensor) overlaps the list's memory anywhere but
// exactly block `own_block` (-1: nowhere): packing kept such aliasing harmless, and a
// backend's copies need not be.
Tensor end_to_end(const std::vector<Tensor>& parts, const Tensor& other, int own_block) {
  if (parts.empty() || !parts.front().is_cpu()) return Tensor();
  const auto* next = static_cast<const uint8_t*>(parts.front().data());
  int64_t total = 0;
  for (const Tensor& p : parts) {
    if (p.data() != next || !p.is_cpu() || p.dtype() != parts.front().dtype()) return Tensor();
    next += p.nbytes();
    total += p.numel();
  }
  if (next == parts.front().data()) return Tensor();  // nothing to move: no memory to view
  const auto* first = static_cast<const uint8_t*>(parts.front().data());
  const auto* theirs = static_cast<const uint8_t*>(other.data());
  const bool overlaps = other.nbytes() > 0 && theirs < next && theirs + other.nbytes() > first;
  const bool is_own_block = own_block >= 0 && other.data() == parts[static_cast<size_t>(own_block)].data() &&
                            other.nbytes() == parts[static_cast<size_t>(own_block)].nbytes();
  if (overlaps && !is_own_block) return Tensor();
  // The view holds every part, and so whatever memory they own, while an op uses it.
  auto held = std::make_shared<std::vector<Tensor>>(parts);
  return Tensor::from_blob(parts.front().data(), {total}, parts.front().dtype(), parts.front().device(),
                           std::shared_ptr<void>(held, held.get()));
}

// Whether a and b share any byte (host or device memory alike).
bool share_memory(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto* pa = static_cast<const char*>(a.data());
  const auto* pb = static_cast<const char*>(b.data());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// Whether `part` is exactly block `block` of `whole` (part.nbytes() bytes each): the
// in-place forms of all_gather_into_tensor and reduce_scatter_tensor, which backends take.
bool is_block_of(const Tensor& part, const Tensor& whole, int block) {
  return part.data() == static_cast<const char*>(whole.data()) + static_cast<size_t>(block) * part.nbytes();
}

// What all_gather_into_tensor and reduce_scatter_tensor write: their whole tensor and one
// rank's block of it may share memory only as torch's in-place form (the block is exactly
// this rank's block of the whole), which backends take as it is. Any other overlap would let
// the op overwrite, while it runs, bytes still to be sent or reduced (shm gave wrong values):
// on the host such an op writes into a buffer of the pool instead, copied into the output
// once the op has ended (as all_to_all_single does); on a device it is refused.
struct WriteTarget {
  Tensor tensor;         // what the backend writes: the output itself, or the scratch buffer
  bool scratch = false;  // whether it is the scratch buffer, to be copied into the output
};

WriteTarget write_target(const ArgumentChecks& checks, OpType op, Tensor& output, const Tensor& input,
                         const Tensor& part, const Tensor& whole, int rank) {
  const char* part_name = &part == &input ? "input" : "output";
  const char* whole_name = &part == &input ? "output" : "input";
  if (!share_memory(output, input) || is_block_of(part, whole, rank)) return {output, false};
  if (!output.is_cpu()) {
    throw InvalidArgument(checks.where(op) + ": '" + part_name + "' overlaps '" + whole_name + "' on " +
                          output.device().str() + " other than as this rank's block of it; pass a separate " +
                          part_name + ", or this rank's block");
  }
  return {pooled_tensor(output.numel(), output.dtype()).reshape(output.shape()), true};
}

// work, followed by copying the scratch buffer into the output where the op wrote one; later
// ops that touch the output wait for that copy (op_overlaps.h).
WorkPtr written_back(const WorkPtr& work, const WriteTarget& target, const Tensor& output, OpOverlaps& overlaps) {
  if (!target.scratch) return work;
  WorkPtr copied = then(work, [result = output, written = target.tensor]() mutable { result.copy_from(written); });
  overlaps.record_write_back(copied, output);
  return copied;
}

// work, followed by copying flat's elements back into parts, end to end. `as`: the op the
// caller asked for, when the flat one differs (all_reduce_coalesced).
WorkPtr unpacked_after(const WorkPtr& work, const Tensor& flat, std::vector<Tensor> parts,
                       std::optional<OpType> as = std::nullopt) {
  return then(
      work,
      [flat, parts]() mutable {
        int64_t offset = 0;
        for (auto& p : parts) {
          p.reshape({p.numel()}).copy_from(flat.flat_slice(offset, p.numel()));
          offset += p.numel();
        }
      },
      as);
}

// parts (one dtype, one device) as one tensor of all their elements: what describes an op
// on a list in its description and fingerprint. Its data is never read.
Tensor described_as_one(const std::vector<Tensor>& parts) {
  int64_t total = 0;
  void* some_data = nullptr;  // any part's (a null one is empty)
  for (const Tensor& t : parts) {
    total += t.numel();
    if (t.numel() > 0) some_data = t.data();
  }
  return Tensor::from_blob(some_data, {total}, parts.front().dtype(), parts.front().device());
}

// Whether a list form's tensors (like `like`) go whole to their device's backend: false for
// host tensors, which the ProcessGroup packs into one and back. The host cannot pack device
// tensors, so their backend must take the op's lists itself (Backend::list_ops, ABI 1.6:
// NCCL does); otherwise the op is refused here, before it is numbered, on every rank alike
// (the ranks' tensors are on one device type), saying what to use instead.
bool whole_on_device(const GroupBackends& backends, const ArgumentChecks& checks, OpType op, const Tensor& like,
                     const std::string& instead) {
  if (like.is_cpu()) return false;
  Backend& b = backends.route(op, like.device().type, checks.where_prefix());
  if (backends.takes_lists(like.device().type, op)) return true;
  const GroupBackend* made = backends.find(like.device().type);
  throw InvalidArgument(checks.where(op) + ": the list form packs on the host, which cannot reach " +
                        like.device().str() + " tensors, and backend " + b.name() + " does not take them whole (" +
                        (made && made->abi_minor < 6 ? "its plugin predates ABI 1.6" : "it does not list the op in list_ops()") +
                        "); " + instead);
}

}  // namespace


namespace {

// A batch whose receive shares memory with another of its ops (a send, or another receive)
// ends with what depends on timing (which transfer lands or is read first): refused, naming
// both, before anything is sent or copied. Sends may share memory (one tensor to several
// peers). Sorted by address, each op is compared with the furthest-reaching send and
// receive before it: O(n log n).
void refuse_shared_memory(const std::vector<P2POp>& ops, const std::string& where) {
  struct Span {
    uintptr_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  spans.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Tensor& t = ops[i].tensor;
    if (t.nbytes() == 0 || t.data() == nullptr) continue;
    const auto begin = reinterpret_cast<uintptr_t>(t.data());
    spans.push_back({begin, begin + t.nbytes(), i});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.index < b.index;
  });
  const Span* furthest_send = nullptr;
  const Span* furthest_recv = nullptr;
  auto kind = [&](size_t i) { return ops[i].kind == P2POp::Kind::kSend ? "a send" : "a recv"; };
  for (const Span& s : spans) {
    const bool is_recv = ops[s.index].kind == P2POp::Kind::kRecv;
    const Span* other = nullptr;
    if (furthest_recv && furthest_recv->end > s.begin) other = furthest_recv;
    else if (is_recv && furthest_send && furthest_send->end > s.begin) other = furthest_send;
    if (other) {
      const size_t a = std::min(other->index, s.index), b = std::max(other->index, s.index);
      throw InvalidArgument(where + ": ops[" + std::to_string(a) + "] (" + kind(a) + ") and ops[" + std::to_string(b) +
                            "] (" + kind(b) + ") share memory (" + ops[a].tensor.describe() + " and " +
                            ops[b].tensor.describe() +
                            "); what a batch receives must not overlap what it sends or receives elsewhere: which "
                            "lands or is read first depends on timing. Use separate tensors");
    }
    const Span*& furthest = is_recv ? furthest_recv : furthest_send;
    if (!furthest || s.end > furthest->end) furthest = &s;
  }
}

OpSpec spec_of(OpType type, const Tensor* tensor, std::chrono::milliseconds timeout) {
  OpSpec spec;
  spec.type = type;
  spec.tensor = tensor;
  spec.timeout = timeout;
  return spec;
}

OpSpec p2p_spec(OpType type, const Tensor& tensor, int peer, const P2POptions& opts) {
  OpSpec spec = spec_of(type, &tensor, opts.timeout);
  spec.kind = OpKind::kPointToPoint;
  spec.root = peer;
  spec.tag = opts.tag;
  return spec;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Collectives

WorkPtr ProcessGroup::all_reduce(Tensor& tensor, const AllReduceOptions& opts) {
  constexpr OpType kOp = OpType::kAllReduce;
  checks_->timeout(kOp, opts.timeout);
  checks_->tensor(kOp, tensor, "tensor");
  checks_->reduce(kOp, opts.op, tensor);
  overlaps_->wait_for_write_backs(&tensor);
  OpSpec spec = spec_of(kOp, &tensor, opts.timeout);
  spec.reduction = opts.op;
  spec.divided = &tensor;
  spec.written = &tensor;
  return issue(spec, [&](Backend& b, const ReductionPlan& plan, const OpContext& ctx) {
    plan.premultiply_in_place(tensor);
    return b.all_reduce(tensor, plan.applied_to(opts), ctx);
  });
}

WorkPtr ProcessGroup::all_reduce_coalesced(std::vector<Tensor>& tensors, const AllReduceOptions& opts) {
  constexpr OpType kOp = OpType::kAllReduceCoalesced;
  checks_->timeout(kOp, opts.timeout);
  if (tensors.empty()) throw InvalidArgument(checks_->where(kOp) + ": 'tensors' is empty");
  for (size_t i = 0; i < tensors.size(); ++i) {
    checks_->tensor(kOp, tensors[i], "tensors");
    if (tensors[i].dtype() != tensors[0].dtype() || tensors[i].device() != tensors[0].device()) {
      throw InvalidArgument(checks_->where(kOp) + ": tensors[" + std::to_string(i) + "] is " + tensors[i].describe() +
                            " but tensors[0] is " + tensors[0].describe() + "; all must share dtype and device");
    }
  }
  const Tensor& first = tensors[0];
  checks_->reduce(kOp, opts.op, first);
  if (first.is_cpu()) {
    // One flat buffer, one reduction: what DDP's buckets do, offered for any list of tensors.
    // Issue order: what earlier ops of the group still write is waited for before it is
    // packed, and later ops on these tensors wait for the write-back (op_overlaps.h).
    overlaps_->wait_for_write_backs(tensors);
    overlaps_->wait_for_writers(tensors);
    Tensor flat = pack(tensors, first.dtype());
    WorkPtr reduced;
    {
      ScratchOutput scratch;
      reduced = all_reduce(flat, opts);
    }
    WorkPtr unpacked = unpacked_after(reduced, flat, tensors, kOp);
    overlaps_->record_write_back(unpacked, tensors);
    return unpacked;
  }
  // Tensors the host cannot pack go whole to a backend that coalesces them (nccl).
  const std::string refused = checks_->where(kOp) + ": coalescing packs on the host; for " + first.device().str() +
                              " tensors issue one all_reduce per tensor";
  try {
    backends_->route(kOp, first.device().type, checks_->where_prefix());
  } catch (const Unsupported& e) {
    throw InvalidArgument(refused + " (" + e.what() + ")");
  }
  // The virtual is ABI 1.5; the op's value is older, so a plugin's listing alone is not enough.
  if (backends_->find(first.device().type)->abi_minor < 5) {
    throw InvalidArgument(refused + " (the plugin predates ABI 1.5)");
  }
  const Tensor whole = described_as_one(tensors);
  OpSpec spec = spec_of(kOp, &whole, opts.timeout);
  spec.reduction = opts.op;  // the plan refuses what the backend cannot reduce on the device
  spec.description_suffix = " in " + std::to_string(tensors.size()) + " tensors";
  return issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.all_reduce_coalesced(tensors, opts, ctx);
  });
}


WorkPtr ProcessGroup::broadcast(Tensor& tensor, const BroadcastOptions& opts) {
  constexpr OpType kOp = OpType::kBroadcast;
  checks_->timeout(kOp, opts.timeout);
  checks_->tensor(kOp, tensor, "tensor");
  checks_->root(kOp, opts.root);
  overlaps_->wait_for_write_backs(&tensor);
  OpSpec spec = spec_of(kOp, &tensor, opts.timeout);
  spec.root = opts.root;
  spec.written = &tensor;
  return issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.broadcast(tensor, opts, ctx);
  });
}

WorkPtr ProcessGroup::reduce(Tensor& tensor, const ReduceOptions& opts) {
  constexpr OpType kOp = OpType::kReduce;
  checks_->timeout(kOp, opts.timeout);
  checks_->tensor(kOp, tensor, "tensor");
  checks_->root(kOp, opts.root);
  checks_->reduce(kOp, opts.op, tensor);
  const bool root = rank() == opts.root;
  overlaps_->wait_for_write_backs(&tensor);
  OpSpec spec = spec_of(kOp, &tensor, opts.timeout);
  spec.root = opts.root;
  spec.reduction = opts.op;
  spec.divided = root ? &tensor : nullptr;  // the result exists on the root only
  spec.written = root ? &tensor : nullptr;
  return issue(spec, [&](Backend& b, const ReductionPlan& plan, const OpContext& ctx) {
    // Off the root, a scaled copy: reduce leaves the other ranks' tensors unchanged.
    Tensor input = plan.premultiplied(tensor, /*in_place=*/root);
    return b.reduce(input, plan.applied_to(opts), ctx);
  });
}

WorkPtr ProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input, const AllGatherOptions& opts) {
  constexpr OpType kOp = OpType::kAllGather;
  checks_->timeout(kOp, opts.timeout);
  checks_->whole_and_part(kOp, output, "output", input, "input");
  overlaps_->wait_for_write_backs(&output, &input);
  const WriteTarget target = write_target(*checks_, kOp, output, input, /*part=*/input, /*whole=*/output, rank());
  OpSpec spec = spec_of(kOp, &input, opts.timeout);
  spec.written = target.scratch ? nullptr : &output;
  WorkPtr work = issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    Tensor into = target.tensor;
    return b.all_gather(into, input, opts, ctx);
  });
  return written_back(work, target, output, *overlaps_);
}

WorkPtr ProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input, const AllGatherOptions& opts) {
  constexpr OpType kOp = OpType::kAllGather;
  checks_->timeout(kOp, opts.timeout);
  checks_->tensor(kOp, input, "input");
  checks_->list(kOp, outputs, "outputs", input, "input");
  overlaps_->wait_for_write_backs(outputs);
  if (whole_on_device(*backends_, *checks_, kOp, input, "use all_gather_into_tensor")) {
    return issue(spec_of(kOp, &input, opts.timeout), [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
      return b.all_gather_list(outputs, input, opts, ctx);
    });
  }
  Tensor in_place = end_to_end(outputs, input, rank());  // all_gather_into_tensor takes its own block in place
  if (in_place.defined()) return all_gather_into_tensor(in_place, input, opts);
  Tensor flat = pooled_tensor(input.numel() * size(), input.dtype());
  WorkPtr gathered;
  {
    ScratchOutput scratch;
    gathered = all_gather_into_tensor(flat, input, opts);
  }
  WorkPtr unpacked = unpacked_after(gathered, flat, outputs);
  overlaps_->record_write_back(unpacked, outputs);
  return unpacked;
}

WorkPtr ProcessGroup::gather(std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts) {
  constexpr OpType kOp = OpType::kGather;
  checks_->timeout(kOp, opts.timeout);
  checks_->tensor(kOp, input, "input");
  checks_->root(kOp, opts.root);
  // Checked on every rank, not just the root: a root that refused alone would leave the
  // others waiting for it until the timeout.
  const bool whole = whole_on_device(*backends_, *checks_, kOp, input, "gather into one tensor");
  const bool root = checks_->list(kOp, outputs, "outputs", input, "input", opts.root);
  overlaps_->wait_for_write_backs(&input);
  if (root) overlaps_->wait_for_write_backs(outputs);
  OpSpec spec = spec_of(kOp, &input, opts.timeout);
  spec.root = opts.root;
  if (whole) {
    return issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
      return b.gather_list(outputs, input, opts, ctx);
    });
  }
  const Tensor in_place = root ? end_to_end(outputs, input, -1) : Tensor();
  Tensor flat = in_place.defined() ? in_place
                : root            ? pooled_tensor(input.numel() * size(), input.dtype())
                                  : Tensor();
  if (in_place.defined()) spec.written = &flat;
  WorkPtr w = issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.gather(flat, input, opts, ctx);
  });
  if (!root || in_place.defined()) return w;
  WorkPtr unpacked = unpacked_after(w, flat, outputs);
  overlaps_->record_write_back(unpacked, outputs);
  return unpacked;
}

WorkPtr ProcessGroup::scatter(Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts) {
  constexpr OpType kOp = OpType::kScatter;
  checks_->timeout(kOp, opts.timeout);
  checks_->tensor(kOp, output, "output");
  checks_->root(kOp, opts.root);
  // On every rank, as in gather.
  const bool whole = whole_on_device(*backends_, *checks_, kOp, output, "scatter from one tensor");
  const bool root = checks_->list(kOp, inputs, "inputs", output, "output", opts.root);
  overlaps_->wait_for_write_backs(&output);
  if (root) overlaps_->wait_for_write_backs(inputs);
  OpSpec spec = spec_of(kOp, &output, opts.timeout);
  spec.root = opts.root;
  if (whole) {
    return issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
      return b.scatter_list(output, inputs, opts, ctx);
    });
  }
  const Tensor in_place = root ? end_to_end(inputs, output, -1) : Tensor();
  if (root && !in_place.defined()) overlaps_->wait_for_writers(inputs);  // issue order: see all_reduce_coalesced
  Tensor flat = in_place.defined() ? in_place : root ? pack(inputs, output.dtype()) : Tensor();
  spec.written = &output;
  return issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.scatter(output, flat, opts, ctx);
  });
}

WorkPtr ProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts) {
  constexpr OpType kOp = OpType::kReduceScatter;
  checks_->timeout(kOp, opts.timeout);
  checks_->whole_and_part(kOp, input, "input", output, "output");
  checks_->reduce(kOp, opts.op, output);
  overlaps_->wait_for_write_backs(&output, &input);
  const WriteTarget target = write_target(*checks_, kOp, output, input, /*part=*/output, /*whole=*/input, rank());
  Tensor reduce_into = target.tensor;
  OpSpec spec = spec_of(kOp, &reduce_into, opts.timeout);
  spec.reduction = opts.op;
  spec.divided = &reduce_into;
  spec.written = target.scratch ? nullptr : &output;
  WorkPtr work = issue(spec, [&](Backend& b, const ReductionPlan& plan, const OpContext& ctx) {
    const Tensor in = plan.premultiplied(input, /*in_place=*/false);  // the input is the caller's
    return b.reduce_scatter(reduce_into, in, plan.applied_to(opts), ctx);
  });
  return written_back(work, target, output, *overlaps_);
}

WorkPtr ProcessGroup::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                     const ReduceScatterOptions& opts) {
  constexpr OpType kOp = OpType::kReduceScatter;
  checks_->timeout(kOp, opts.timeout);
  checks_->tensor(kOp, output, "output");
  checks_->list(kOp, inputs, "inputs", output, "output");
  overlaps_->wait_for_write_backs(inputs);
  if (whole_on_device(*backends_, *checks_, kOp, output, "use reduce_scatter_tensor")) {
    checks_->reduce(kOp, opts.op, output);
    OpSpec spec = spec_of(kOp, &output, opts.timeout);
    spec.reduction = opts.op;  // on a device, the plan refuses what the backend cannot reduce
    return issue(spec, [&](Backend& b, const ReductionPlan& plan, const OpContext& ctx) {
      return b.reduce_scatter_list(output, inputs, plan.applied_to(opts), ctx);
    });
  }
  overlaps_->wait_for_writers(inputs);  // issue order: see all_reduce_coalesced
  Tensor flat = pack(inputs, output.dtype());
  return reduce_scatter_tensor(output, flat, opts);
}

WorkPtr ProcessGroup::all_to_all_single(Tensor& output, const Tensor& input,
                                        const std::vector<int64_t>& output_split_sizes,
                                        const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) {
  constexpr OpType kOp = OpType::kAllToAll;
  checks_->timeout(kOp, opts.timeout);
  checks_->tensor(kOp, output, "output");
  checks_->tensor(kOp, input, "input");
  checks_->alike(kOp, output, "output", input, "input");
  // Split sizes count rows of dim 0 (each within it, their sum too); the backend gets
  // element counts.
  auto counts = [&](const Tensor& t, const std::vector<int64_t>& splits, const char* arg) {
    return checks_->split_counts(kOp, t, splits, arg);
  };
  const auto out_counts = counts(output, output_split_sizes, "output");
  const auto in_counts = counts(input, input_split_sizes, "input");
  // The one pairing visible locally: what this rank sends itself must fit what it expects
  // from itself. (Mismatches between two ranks surface as a failed op on both.)
  const auto me = static_cast<size_t>(rank());
  if (in_counts[me] != out_counts[me]) {
    throw InvalidArgument(checks_->where(kOp) + ": this rank sends itself " + std::to_string(in_counts[me]) +
                          " elements but expects " + std::to_string(out_counts[me]) +
                          " from itself; input split " + std::to_string(rank()) + " must equal output split " +
                          std::to_string(rank()));
  }
  // torch's in-place form, all_to_all_single(t, t): backends post receives into the output
  // while sends still read the input, so a block that arrives early, or this rank's own
  // block, lands on rows not yet sent (gloo and shm returned wrong data with skewed splits:
  // helper-69). The op receives into a buffer of the pool and the result is copied into
  // the output once it has ended; the input is still read when the op runs, in issue order
  // behind the group's earlier ops.
  overlaps_->wait_for_write_backs(&output, &input);
  const char* input_bytes = static_cast<const char*>(input.data());
  const char* output_bytes = static_cast<const char*>(output.data());
  const bool overlap = input.nbytes() > 0 && output.nbytes() > 0 && input_bytes < output_bytes + output.nbytes() &&
                       output_bytes < input_bytes + input.nbytes();
  if (overlap && !output.is_cpu()) {
    throw InvalidArgument(checks_->where(kOp) + ": 'output' overlaps 'input' on " + output.device().str() +
                          "; an in-place all_to_all needs host tensors: pass a separate output");
  }
  Tensor receive_into = overlap ? pooled_tensor(output.numel(), output.dtype()).reshape(output.shape()) : output;
  OpSpec spec = spec_of(kOp, &input, opts.timeout);
  spec.send_counts = in_counts;
  spec.recv_counts = out_counts;
  spec.written = overlap ? nullptr : &output;
  WorkPtr work = issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.all_to_all(receive_into, input, out_counts, in_counts, opts, ctx);
  });
  if (!overlap) return work;
  WorkPtr copied = then(work, [result = output, received = receive_into]() mutable { result.copy_from(received); });
  overlaps_->record_write_back(copied, output);
  return copied;
}

WorkPtr ProcessGroup::all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                 const AllToAllOptions& opts) {
  constexpr OpType kOp = OpType::kAllToAll;
  checks_->timeout(kOp, opts.timeout);
  if (static_cast<int>(outputs.size()) != size() || static_cast<int>(inputs.size()) != size()) {
    throw InvalidArgument(checks_->where(kOp) + ": 'outputs' and 'inputs' need one tensor per rank (" +
                          std::to_string(size()) + "), got " + std::to_string(outputs.size()) + " and " +
                          std::to_string(inputs.size()));
  }
  std::vector<int64_t> out_counts, in_counts;
  for (int r = 0; r < size(); ++r) {
    checks_->tensor(kOp, outputs[r], "outputs[r]");
    checks_->tensor(kOp, inputs[r], "inputs[r]");
    if (outputs[r].dtype() != inputs[0].dtype() || inputs[r].dtype() != inputs[0].dtype()) {
      throw InvalidArgument(checks_->where(kOp) + ": all tensors must share one dtype (" + dtype_name(inputs[0].dtype()) + ")");
    }
    out_counts.push_back(outputs[r].numel());
    in_counts.push_back(inputs[r].numel());
  }
  for (int r = 0; r < size(); ++r) {
    if (outputs[r].device() != inputs[0].device() || inputs[r].device() != inputs[0].device()) {
      throw InvalidArgument(checks_->where(kOp) + ": all tensors must be on one device (" + inputs[0].device().str() + ")");
    }
  }
  // As in all_to_all_single: what this rank sends itself must fit what it expects from
  // itself (pairs between ranks surface as a failed op on both).
  const auto me = static_cast<size_t>(rank());
  if (in_counts[me] != out_counts[me]) {
    throw InvalidArgument(checks_->where(kOp) + ": inputs[" + std::to_string(rank()) + "] has " +
                          std::to_string(in_counts[me]) + " elements but outputs[" + std::to_string(rank()) + "] has " +
                          std::to_string(out_counts[me]) + "; what this rank sends itself must fit");
  }
  overlaps_->wait_for_write_backs(outputs);
  overlaps_->wait_for_write_backs(inputs);
  if (whole_on_device(*backends_, *checks_, kOp, inputs[0], "use all_to_all_single")) {
    const Tensor whole = described_as_one(inputs);  // as the packed input describes a host op
    OpSpec spec = spec_of(kOp, &whole, opts.timeout);
    spec.send_counts = in_counts;
    spec.recv_counts = out_counts;
    return issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
      return b.all_to_all_list(outputs, inputs, opts, ctx);
    });
  }
  overlaps_->wait_for_writers(inputs);  // issue order: see all_reduce_coalesced
  Tensor in = pack(inputs, inputs[0].dtype());
  Tensor out = pooled_tensor(std::accumulate(out_counts.begin(), out_counts.end(), int64_t{0}), inputs[0].dtype());
  OpSpec spec = spec_of(kOp, &in, opts.timeout);
  spec.send_counts = in_counts;
  spec.recv_counts = out_counts;
  WorkPtr w = issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.all_to_all(out, in, out_counts, in_counts, opts, ctx);
  });
  WorkPtr unpacked = unpacked_after(w, out, outputs);
  overlaps_->record_write_back(unpacked, outputs);
  return unpacked;
}

WorkPtr ProcessGroup::barrier(const BarrierOptions& opts) {
  // Any backend of the group synchronises all its ranks: the host one where there is one
  // (with none, routing raises the host backend's deferred error).
  checks_->timeout(OpType::kBarrier, opts.timeout);
  OpSpec spec = spec_of(OpType::kBarrier, nullptr, opts.timeout);
  spec.device = backends_->empty() ? DeviceType::kCPU : backends_->all().begin()->first;
  return issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) { return b.barrier(opts, ctx); });
}

// ---------------------------------------------------------------------------------------
// Point to point

WorkPtr ProcessGroup::send(const Tensor& tensor, int dst, const P2POptions& opts) {
  checks_->timeout(OpType::kSend, opts.timeout);
  checks_->p2p(OpType::kSend, tensor, "dst", dst, opts.tag);
  overlaps_->wait_for_write_backs(&tensor);
  return issue(p2p_spec(OpType::kSend, tensor, dst, opts), [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.send(tensor, dst, opts, ctx);
  });
}

WorkPtr ProcessGroup::recv(Tensor& tensor, int src, const P2POptions& opts) {
  checks_->timeout(OpType::kRecv, opts.timeout);
  checks_->p2p(OpType::kRecv, tensor, "src", src, opts.tag);
  overlaps_->wait_for_write_backs(&tensor);
  OpSpec spec = p2p_spec(OpType::kRecv, tensor, src, opts);
  spec.written = &tensor;
  WorkPtr work = issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.recv(tensor, src, opts, ctx);
  });
  // Its source is src, whether or not the backend says so (gloo and shm did, mpi and nccl
  // did not): set once it has received, as recv_any_source's is. The callback runs on the
  // Work itself as it ends, so the raw pointer is alive then (a shared one would be a cycle).
  Work* received = work.get();
  work->on_finish([received, src](std::exception_ptr error) {
    if (!error) received->set_source_rank(src);
  });
  return work;
}

WorkPtr ProcessGroup::recv_any_source(Tensor& tensor, const P2POptions& opts) {
  constexpr OpType kOp = OpType::kRecvAnySource;
  checks_->timeout(kOp, opts.timeout);
  checks_->p2p(kOp, tensor, nullptr, -1, opts.tag);
  overlaps_->wait_for_write_backs(&tensor);
  OpSpec spec = p2p_spec(kOp, tensor, -1, opts);
  spec.written = &tensor;
  return issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.recv_any_source(tensor, opts, ctx);
  });
}

WorkPtr ProcessGroup::batch_isend_irecv(std::vector<P2POp>& ops, const P2POptions& opts) {
  constexpr OpType kOp = OpType::kBatchP2P;
  checks_->timeout(kOp, opts.timeout);
  const std::string where = checks_->where(kOp);
  if (ops.empty()) throw InvalidArgument(where + ": the batch is empty");
  if (opts.tag < 0) throw InvalidArgument(where + ": tag must be >= 0, got " + std::to_string(opts.tag));
  std::vector<size_t> self_sends, self_recvs;  // ops with this rank itself, in order
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string name = "ops[" + std::to_string(i) + "]";
    if (ops[i].kind != P2POp::Kind::kSend && ops[i].kind != P2POp::Kind::kRecv) {
      throw InvalidArgument(where + ": " + name + " is neither a send nor a receive");
    }
    checks_->tensor(kOp, ops[i].tensor, (name + ".tensor").c_str());
    if (ops[i].peer == rank() && ops[i].tensor.is_cpu()) {
      (ops[i].kind == P2POp::Kind::kSend ? self_sends : self_recvs).push_back(i);
    } else {
      checks_->peer(kOp, ops[i].peer, (name + ".peer").c_str());
    }
    if (ops[i].tensor.device().type != ops[0].tensor.device().type) {
      throw InvalidArgument(where + ": " + name + " is on " + ops[i].tensor.device().str() + " but ops[0] on " +
                            ops[0].tensor.device().str() + "; one batch goes to one backend");
    }
  }
  const DeviceType device = ops[0].tensor.device().type;
  // A backend that could not be created says why, before anything is issued, as the op's
  // error (the batch needs no listing of kOp: route() would refuse a backend that sends one by one).
  backends_->serving(device, kOp, checks_->where_prefix());
  // pair_with_itself checks its pairs first (and then this), before it copies.
  if (self_sends.empty() && self_recvs.empty()) refuse_shared_memory(ops, where);
  pair_with_itself(ops, self_sends, self_recvs, where);
  // What goes to the backend: the ops with other ranks.
  std::vector<P2POp> with_others;
  if (!self_sends.empty()) {
    for (const P2POp& op : ops) {
      if (op.peer != rank()) with_others.push_back(op);
    }
  }
  std::vector<P2POp>& batch = self_sends.empty() ? ops : with_others;
  const std::string description = where + " of " + std::to_string(ops.size()) + " ops";
  if (batch.empty()) {  // every op was with this rank itself: done
    auto done = std::make_shared<Work>(kOp, 0, description);
    done->finish(nullptr);
    return done;
  }
  if (backends_->lists(device, kOp)) {
    // One call to a backend that batches natively (nccl).
    OpSpec spec = spec_of(kOp, nullptr, opts.timeout);
    spec.kind = OpKind::kPointToPoint;
    spec.device = device;
    spec.tag = opts.tag;
    spec.batch = &batch;
    spec.description_suffix = " (" + std::to_string(batch.size()) + " sends and receives)";
    return issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) { return b.batch_p2p(batch, opts, ctx); });
  }
  // One by one, in order: backends whose sends and receives progress on their own.
  std::vector<WorkPtr> parts;
  for (auto& op : batch) {
    parts.push_back(op.kind == P2POp::Kind::kSend ? send(op.tensor, op.peer, opts) : recv(op.tensor, op.peer, opts));
  }
  return all_of(parts, kOp, parts.front()->seq(), description);
}

void ProcessGroup::pair_with_itself(std::vector<P2POp>& ops, const std::vector<size_t>& sends,
                                    const std::vector<size_t>& recvs, const std::string& where) const {
  if (sends.empty() && recvs.empty()) return;
  if (sends.size() != recvs.size()) {
    throw InvalidArgument(where + ": the batch sends this rank itself " + std::to_string(sends.size()) +
                          " tensors and receives " + std::to_string(recvs.size()) +
                          " from itself; each send to itself pairs with a recv from itself, in order");
  }
  for (size_t k = 0; k < sends.size(); ++k) {
    const Tensor& from = ops[sends[k]].tensor;
    const Tensor& to = ops[recvs[k]].tensor;
    if (from.dtype() != to.dtype() || from.numel() != to.numel()) {
      throw InvalidArgument(where + ": ops[" + std::to_string(sends[k]) + "] sends this rank itself " +
                            from.describe() + " but ops[" + std::to_string(recvs[k]) +
                            "], the recv from itself it pairs with, holds " + to.describe());
    }
  }
  refuse_shared_memory(ops, where);
  // Checked first, copied after: a refused batch changes nothing. The copies are made now,
  // at issue: in issue order, after the group's earlier ops that write these tensors, and
  // before a later op reads them (op_overlaps.h).
  std::vector<Tensor> copied;
  for (size_t k = 0; k < sends.size(); ++k) {
    copied.push_back(ops[sends[k]].tensor);
    copied.push_back(ops[recvs[k]].tensor);
  }
  overlaps_->wait_for_write_backs(copied);
  overlaps_->wait_for_writers(copied);
  for (size_t k = 0; k < sends.size(); ++k) {
    if (ops[sends[k]].tensor.nbytes() > 0) {
      std::memcpy(ops[recvs[k]].tensor.data(), ops[sends[k]].tensor.data(), ops[sends[k]].tensor.nbytes());
    }
  }
}

}  // namespace distcomm
