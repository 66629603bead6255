// all_reduce over gloo, with the algorithm chosen per group and op (gloo_all_reduce.h).
#include "backends/gloo/gloo_all_reduce.h"

#include <climits>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>

#include "backends/gloo/gloo_op.h"
#include "backends/gloo/gloo_reduction.h"

namespace distcomm {
namespace gloo {
namespace {

// gloo's algorithm classes are templates on the element type and build their buffers
// (and take context slots) per instance, so one is built per op. They wait with the
// connections' timeout, which is the group's: a per-op timeout reaches them only through
// the stall watch, which fails the group at the op's deadline.
template <typename T, DType D>
void run_algorithm_class(AllReduceAlgorithm algorithm, const std::shared_ptr<::gloo::Context>& context,
                         void* data, int count, ReduceOp op) {
  const std::vector<T*> ptrs{static_cast<T*>(data)};
  const ::gloo::ReductionFunction<T>* fn = reduction_for_algorithm<T, D>(op);
  if (algorithm == AllReduceAlgorithm::kRingChunked) {
    ::gloo::AllreduceRingChunked<T>(context, ptrs, count, fn).run();
  } else {
    ::gloo::AllreduceHalvingDoubling<T>(context, ptrs, count, fn).run();
  }
}

}  // namespace

void run_all_reduce(CollectiveEnv& env, GlooOp& op) {
  Tensor& t = op.out;
  const auto count = static_cast<size_t>(t.numel());
  AllReduceAlgorithm algorithm =
      resolve_all_reduce_algorithm(env.algorithm, count, element_size(t.dtype()), env.context->size);
  // The algorithm classes count elements in an int.
  const bool class_based = algorithm == AllReduceAlgorithm::kRingChunked ||
                           algorithm == AllReduceAlgorithm::kHalvingDoubling;
  if (class_based && count > static_cast<size_t>(INT_MAX)) algorithm = AllReduceAlgorithm::kRing;

  if (class_based && algorithm != AllReduceAlgorithm::kRing) {
    // These classes take their slots from the context, not from the op's tag, so nothing
    // would keep ranks that disagree on the count apart (a longer message than a receive
    // aborts gloo's network thread). A barrier in the op's tag goes first: ranks whose ops
    // differ never pass it. One round trip, paid only with these opt-in algorithms.
    ::gloo::BarrierOptions agree(env.context);
    agree.setTag(op.tag);
    agree.setTimeout(op.wait_limit);
    ::gloo::barrier(agree);
    const int n = static_cast<int>(count);
    switch (t.dtype()) {
      case DType::kFloat32: return run_algorithm_class<float, DType::kFloat32>(algorithm, env.context, t.data(), n, op.reduce);
      case DType::kFloat64: return run_algorithm_class<double, DType::kFloat64>(algorithm, env.context, t.data(), n, op.reduce);
      case DType::kFloat16: return run_algorithm_class<Half, DType::kFloat16>(algorithm, env.context, t.data(), n, op.reduce);
      case DType::kBFloat16: return run_algorithm_class<BFloat16, DType::kBFloat16>(algorithm, env.context, t.data(), n, op.reduce);
      case DType::kInt8: return run_algorithm_class<int8_t, DType::kInt8>(algorithm, env.context, t.data(), n, op.reduce);
      case DType::kUInt8: return run_algorithm_class<uint8_t, DType::kUInt8>(algorithm, env.context, t.data(), n, op.reduce);
      case DType::kInt32: return run_algorithm_class<int32_t, DType::kInt32>(algorithm, env.context, t.data(), n, op.reduce);
      case DType::kInt64: return run_algorithm_class<int64_t, DType::kInt64>(algorithm, env.context, t.data(), n, op.reduce);
      case DType::kBool: return run_algorithm_class<uint8_t, DType::kBool>(algorithm, env.context, t.data(), n, op.reduce);
    }
    return;
  }
  ::gloo::AllreduceOptions opts(env.context);
  opts.setAlgorithm(algorithm == AllReduceAlgorithm::kBcube ? ::gloo::AllreduceOptions::Algorithm::BCUBE
                                                            : ::gloo::AllreduceOptions::Algorithm::RING);
  with_element_type(element_size(t.dtype()), [&](auto zero) {
    using U = decltype(zero);
    opts.setOutput(static_cast<U*>(t.data()), count);
  });
  opts.setReduceFunction(reduce_function(t.dtype(), op.reduce));
  opts.setTag(op.tag);
  opts.setTimeout(op.wait_limit);
  ::gloo::allreduce(opts);
}

}  // namespace gloo
}  // namespace distcomm
