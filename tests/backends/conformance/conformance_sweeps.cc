// Case lists and sweeps (conformance.h).
#include "tests/backends/conformance/conformance.h"

namespace distcomm {
namespace conformance {

std::string ReduceCase::name() const { return std::string(dtype_name(dtype)) + " " + op.name(); }

std::vector<DType> all_dtypes() {
  return {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
          DType::kUInt8,   DType::kInt32,   DType::kInt64,   DType::kBool};
}

std::vector<ReduceCase> supported_reduce_cases() {
  const ReduceOp ops[] = {ReduceOp::SUM, ReduceOp::AVG,  ReduceOp::PRODUCT, ReduceOp::MIN,
                          ReduceOp::MAX, ReduceOp::BAND, ReduceOp::BOR,     ReduceOp::BXOR,
                          ReduceOp::premul_sum(0.5)};
  std::vector<ReduceCase> cases;
  for (DType dtype : all_dtypes()) {
    for (const ReduceOp& op : ops) {
      if (reduce_supported(op, dtype)) cases.push_back({dtype, op});
    }
  }
  return cases;
}

void sweep_reductions(ProcessGroup& pg, int64_t count, const Placement& p) {
  bool list = false;
  for (const ReduceCase& c : supported_reduce_cases()) {
    check_all_reduce(pg, c.dtype, c.op, count, p);
    check_reduce(pg, c.dtype, c.op, count, pg.size() - 1, p);
    check_reduce_scatter(pg, c.dtype, c.op, count, list ? Layout::kList : Layout::kTensor, p);
    list = !list;
  }
  if (count == 1) {  // once per sweep over the counts
    check_nan_in_min_max(pg, p);
    check_signed_zeros_in_min_max(pg, p);
    check_avg_near_the_top_of_16bit_ranges(pg, p);
    check_integer_sums_wrap(pg, p);
  }
}

void sweep_data_movement(ProcessGroup& pg, int64_t count, const Placement& p) {
  const int last = pg.size() - 1;
  const int middle = pg.size() / 2;
  for (DType dtype : all_dtypes()) {
    check_broadcast(pg, dtype, count, last, p);
    for (Layout layout : {Layout::kList, Layout::kTensor, Layout::kInPlace}) check_all_gather(pg, dtype, count, layout, p);
    check_gather(pg, dtype, count, middle, p);
    check_scatter(pg, dtype, count, last, p);
    check_all_to_all_single(pg, dtype, count, false, p);
    check_all_to_all_single(pg, dtype, count, true, p);
    check_all_to_all_list(pg, dtype, count, p);
    check_all_to_all_idle_rank(pg, dtype, count, p);
    check_all_to_all_in_place(pg, dtype, count, p);
  }
  if (&p == &host()) check_lists_of_views(pg, count);
}

void sweep_large(ProcessGroup& pg, int64_t count, const Placement& p) {
  const int last = pg.size() - 1;
  check_all_reduce(pg, DType::kFloat32, ReduceOp::SUM, count, p);
  check_all_reduce(pg, DType::kFloat32, ReduceOp::MAX, count, p);
  check_all_reduce(pg, DType::kBFloat16, ReduceOp::SUM, count, p);
  check_all_reduce(pg, DType::kInt64, ReduceOp::SUM, count, p);
  check_reduce(pg, DType::kFloat16, ReduceOp::SUM, count, last, p);
  check_reduce_scatter(pg, DType::kFloat32, ReduceOp::SUM, count, Layout::kTensor, p);
  check_broadcast(pg, DType::kFloat32, count, last, p);
  check_all_gather(pg, DType::kFloat32, count, Layout::kTensor, p);
}

void sweep_point_to_point(ProcessGroup& pg, int64_t large_count, const Placement& p) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt64, DType::kBool}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1000}}) check_send_recv(pg, dtype, count, p);
  }
  check_send_recv(pg, DType::kFloat32, large_count, p);
  check_recv_any_source(pg, 0, p);
  check_recv_any_source(pg, 100, p);
  check_barrier(pg, p);
}

const Placement& host() {
  static const Placement identity{[](const Tensor& t) { return t; }, [](const Tensor& t) { return t; }};
  return identity;
}

}  // namespace conformance
}  // namespace distcomm
