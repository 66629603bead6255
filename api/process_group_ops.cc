// ProcessGroup: the collectives and point-to-point ops. Each checks its arguments, routes
// to the backend of the tensors' device, adapts list forms to the flat ops backends
// implement (pack, op, unpack) and AVG / PREMUL_SUM to a SUM where a backend lacks them.
#include <algorithm>
#include <numeric>

#include "api/errors.h"
#include "api/process_group.h"

namespace distcomm {
namespace {

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

}  // namespace

WorkPtr ProcessGroup::all_reduce(Tensor& tensor, const AllReduceOptions& opts) {
  constexpr OpType kOp = OpType::kAllReduce;
  check_tensor(kOp, tensor, "tensor");
  check_reduce(kOp, opts.op, tensor);
  Backend& b = route(kOp, tensor);
  const ReductionPlan plan = plan_reduction(kOp, b, opts.op, tensor);
  OpContext ctx = next_context(kOp, &tensor, opts.timeout);
  with_reduction(ctx, opts.op);
  check_detail(ctx);
  premultiplied(plan, tensor, /*in_place=*/true);
  return divided_after(plan, recorded(ctx, [&] { return b.all_reduce(tensor, planned(opts, plan), ctx); }), tensor);
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
  if (!tensors[0].is_cpu()) return coalesced_by_backend(tensors, opts);
  // One flat buffer, one reduction: what DDP's buckets do, offered for any list of tensors.
  Tensor flat = pack(tensors, tensors[0].dtype());
  return unpacked_after(all_reduce(flat, opts), flat, tensors, kOp);
}

WorkPtr ProcessGroup::coalesced_by_backend(std::vector<Tensor>& tensors, const AllReduceOptions& opts) {
  constexpr OpType kOp = OpType::kAllReduceCoalesced;
  const Tensor& first = tensors[0];
  const std::string refused = where(kOp) + ": coalescing packs on the host; for " + first.device().str() +
                              " tensors issue one all_reduce per tensor";
  Backend* b = nullptr;
  try {
    b = &route(kOp, first);
  } catch (const Unsupported& e) {
    throw InvalidArgument(refused + " (" + e.what() + ")");
  }
  // The virtual is ABI 1.5; the op's value is older, so a plugin's listing alone is not enough.
  if (abi_minor_[first.device().type] < 5) throw InvalidArgument(refused + " (the plugin predates ABI 1.5)");
  check_reduce(kOp, opts.op, first);
  plan_reduction(kOp, *b, opts.op, first);  // refuses what the backend cannot reduce on the device
  int64_t total = 0;
  void* some_data = nullptr;  // any tensor's (a null one is empty)
  for (const Tensor& t : tensors) {
    total += t.numel();
    if (t.numel() > 0) some_data = t.data();
  }
  // Describes the whole op (dtype, elements, device) for its description and fingerprint;
  // its data is never read.
  const Tensor whole = Tensor::from_blob(some_data, {total}, first.dtype(), first.device());
  OpContext ctx = next_context(kOp, &whole, opts.timeout);
  ctx.description += " in " + std::to_string(tensors.size()) + " tensors";
  with_reduction(ctx, opts.op);
  check_detail(ctx);
  return recorded(ctx, [&] { return b->all_reduce_coalesced(tensors, opts, ctx); });
}

WorkPtr ProcessGroup::broadcast(Tensor& tensor, const BroadcastOptions& opts) {
  constexpr OpType kOp = OpType::kBroadcast;
  check_tensor(kOp, tensor, "tensor");
  check_root(kOp, opts.root);
  Backend& b = route(kOp, tensor);
  OpContext ctx = next_context(kOp, &tensor, opts.timeout);
  ctx.fingerprint.root = opts.root;
  return recorded(ctx, [&] { return b.broadcast(tensor, opts, check_detail(ctx)); });
}

WorkPtr ProcessGroup::reduce(Tensor& tensor, const ReduceOptions& opts) {
  constexpr OpType kOp = OpType::kReduce;
  check_tensor(kOp, tensor, "tensor");
  check_root(kOp, opts.root);
  check_reduce(kOp, opts.op, tensor);
  Backend& b = route(kOp, tensor);
  ReductionPlan plan = plan_reduction(kOp, b, opts.op, tensor);
  OpContext ctx = next_context(kOp, &tensor, opts.timeout);
  ctx.fingerprint.root = opts.root;
  with_reduction(ctx, opts.op);
  check_detail(ctx);
  // Off the root, a scaled copy: reduce leaves the other ranks' tensors unchanged.
  const bool root = rank() == opts.root;
  Tensor input = premultiplied(plan, tensor, /*in_place=*/root);
  if (!root) plan.divide_by = 1;  // the result exists on the root only
  return divided_after(plan, recorded(ctx, [&] { return b.reduce(input, planned(opts, plan), ctx); }), input);
}

WorkPtr ProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input, const AllGatherOptions& opts) {
  constexpr OpType kOp = OpType::kAllGather;
  check_whole_and_part(kOp, output, "output", input, "input");
  Backend& b = route(kOp, input);
  const OpContext ctx = next_context(kOp, &input, opts.timeout);
  return recorded(ctx, [&] { return b.all_gather(output, input, opts, check_detail(ctx)); });
}

WorkPtr ProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input, const AllGatherOptions& opts) {
  constexpr OpType kOp = OpType::kAllGather;
  check_tensor(kOp, input, "input");
  check_list(kOp, outputs, "outputs", input, "input");
  require_host(kOp, input, "the list form of all_gather; use all_gather_into_tensor");
  Tensor flat = Tensor::empty({input.numel() * size()}, input.dtype());
  return unpacked_after(all_gather_into_tensor(flat, input, opts), flat, outputs);
}

WorkPtr ProcessGroup::gather(std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts) {
  constexpr OpType kOp = OpType::kGather;
  check_tensor(kOp, input, "input");
  check_root(kOp, opts.root);
  // Checked on every rank, not just the root: a root that refused alone would leave the
  // others waiting for it until the timeout.
  require_host(kOp, input, "gather into a list");
  const bool root = check_list(kOp, outputs, "outputs", input, "input", opts.root);
  Tensor flat = root ? Tensor::empty({input.numel() * size()}, input.dtype()) : Tensor();
  Backend& b = route(kOp, input);
  OpContext ctx = next_context(kOp, &input, opts.timeout);
  ctx.fingerprint.root = opts.root;
  WorkPtr w = recorded(ctx, [&] { return b.gather(flat, input, opts, check_detail(ctx)); });
  return root ? unpacked_after(w, flat, outputs) : w;
}

WorkPtr ProcessGroup::scatter(Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts) {
  constexpr OpType kOp = OpType::kScatter;
  check_tensor(kOp, output, "output");
  check_root(kOp, opts.root);
  require_host(kOp, output, "scatter from a list");  // on every rank, as in gather
  const bool root = check_list(kOp, inputs, "inputs", output, "output", opts.root);
  Tensor flat = root ? pack(inputs, output.dtype()) : Tensor();
  Backend& b = route(kOp, output);
  OpContext ctx = next_context(kOp, &output, opts.timeout);
  ctx.fingerprint.root = opts.root;
  return recorded(ctx, [&] { return b.scatter(output, flat, opts, check_detail(ctx)); });
}

WorkPtr ProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts) {
  constexpr OpType kOp = OpType::kReduceScatter;
  check_whole_and_part(kOp, input, "input", output, "output");
  check_reduce(kOp, opts.op, output);
  Backend& b = route(kOp, output);
  const ReductionPlan plan = plan_reduction(kOp, b, opts.op, output);
  OpContext ctx = next_context(kOp, &output, opts.timeout);
  with_reduction(ctx, opts.op);
  check_detail(ctx);
  const Tensor in = premultiplied(plan, input, /*in_place=*/false);  // the input is the caller's
  return divided_after(plan, recorded(ctx, [&] { return b.reduce_scatter(output, in, planned(opts, plan), ctx); }), output);
}

WorkPtr ProcessGroup::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                     const ReduceScatterOptions& opts) {
  constexpr OpType kOp = OpType::kReduceScatter;
  check_tensor(kOp, output, "output");
  check_list(kOp, inputs, "inputs", output, "output");
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
  check_alike(kOp, output, "output", input, "input");
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
  OpContext ctx = next_context(kOp, &input, opts.timeout);
  ctx.fingerprint.send_counts = in_counts;
  ctx.fingerprint.recv_counts = out_counts;
  return recorded(ctx, [&] { return b.all_to_all(output, input, out_counts, in_counts, opts, check_detail(ctx)); });
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
  ctx.fingerprint.send_counts = in_counts;
  ctx.fingerprint.recv_counts = out_counts;
  return unpacked_after(
      recorded(ctx, [&] { return b.all_to_all(out, in, out_counts, in_counts, opts, check_detail(ctx)); }), out, outputs);
}

WorkPtr ProcessGroup::barrier(const BarrierOptions& opts) {
  constexpr OpType kOp = OpType::kBarrier;
  // Any backend of the group synchronises all its ranks: the host one where there is one
  // (with none, route() raises the host backend's deferred error).
  Backend& b = route(kOp, backends_.empty() ? DeviceType::kCPU : backends_.begin()->first);
  const OpContext ctx = next_context(kOp, nullptr, opts.timeout);
  return recorded(ctx, [&] { return b.barrier(opts, check_detail(ctx)); });
}

// ---------------------------------------------------------------------------------------
// Point to point

WorkPtr ProcessGroup::send(const Tensor& tensor, int dst, const P2POptions& opts) {
  constexpr OpType kOp = OpType::kSend;
  check_p2p(kOp, tensor, "dst", dst, opts.tag);
  Backend& b = route(kOp, tensor);
  const OpContext ctx = p2p_context(kOp, tensor, dst, opts);
  return recorded(ctx, [&] { return b.send(tensor, dst, opts, check_detail(ctx)); });
}

WorkPtr ProcessGroup::recv(Tensor& tensor, int src, const P2POptions& opts) {
  constexpr OpType kOp = OpType::kRecv;
  check_p2p(kOp, tensor, "src", src, opts.tag);
  Backend& b = route(kOp, tensor);
  const OpContext ctx = p2p_context(kOp, tensor, src, opts);
  return checked_recv(recorded(ctx, [&] { return b.recv(tensor, src, opts, ctx); }), ctx);
}

WorkPtr ProcessGroup::recv_any_source(Tensor& tensor, const P2POptions& opts) {
  constexpr OpType kOp = OpType::kRecvAnySource;
  check_p2p(kOp, tensor, nullptr, -1, opts.tag);
  Backend& b = route(kOp, tensor);
  const OpContext ctx = p2p_context(kOp, tensor, -1, opts);
  return checked_recv(recorded(ctx, [&] { return b.recv_any_source(tensor, opts, ctx); }), ctx);
}

}  // namespace distcomm
