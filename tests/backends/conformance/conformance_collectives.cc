// Conformance checks of the collectives (conformance.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include <gtest/gtest.h>

#include "tests/backends/conformance/conformance.h"
#include "tests/backends/conformance/conformance_values.h"

namespace distcomm {
namespace conformance {

using internal::data_value;
using internal::expect_elements;
using internal::Guarded;
using internal::host_tensor;
using internal::reduce_expected;
using internal::reduce_input;
using internal::reduce_tolerance;

namespace {

std::string describe(const std::string& op, DType dtype, int64_t count, const std::string& more = "") {
  return op + " " + dtype_name(dtype) + " count=" + std::to_string(count) + (more.empty() ? "" : " " + more);
}

std::string root_str(int root) { return "root=" + std::to_string(root); }

// What rank `rank` contributes at element i to a data-movement op (distinct per rank).
double rank_value(DType dtype, int rank, int64_t i) { return data_value(dtype, rank * 1009 + i * 3 + 1); }

// A value a rank writes where it expects the op to overwrite it.
double junk_value(DType dtype, int rank, int64_t i) { return data_value(dtype, rank * 7 + i + 57); }

std::vector<Tensor> device_list(int n, DType dtype, int64_t count, const Placement& p,
                                const std::function<double(int index, int64_t i)>& value) {
  std::vector<Tensor> out;
  for (int k = 0; k < n; ++k) {
    out.push_back(p.to_device(host_tensor(dtype, {count}, [&](int64_t i) { return value(k, i); })));
  }
  return out;
}

}  // namespace

void check_all_reduce(ProcessGroup& pg, DType dtype, ReduceOp op, int64_t count, const Placement& p) {
  const std::string what = describe("all_reduce", dtype, count, op.name());
  Guarded t(dtype, count, [&](int64_t i) { return reduce_input(dtype, op, pg.rank(), i); }, p);
  AllReduceOptions o;
  o.op = op;
  pg.all_reduce(t.view(), o)->wait();
  t.check([&](int64_t i) { return reduce_expected(dtype, op, pg.size(), i); }, what, reduce_tolerance(dtype, op));
}

void check_nan_in_min_max(ProcessGroup& pg, const Placement& p) {
  const int me = pg.rank();
  const int size = pg.size();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Element k holds a NaN on rank k, and 1 + rank elsewhere; element `size` holds no NaN.
  auto input = [&](int64_t i) { return i == me ? nan : 1.0 + me; };
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::MIN, ReduceOp::MAX}) {
      auto expected = [&](int64_t i) { return i < size ? nan : (op.kind == ReduceOp::MAX ? size : 1.0); };
      Guarded all(dtype, size + 1, input, p);
      AllReduceOptions a;
      a.op = op;
      pg.all_reduce(all.view(), a)->wait();
      all.check(expected, describe("all_reduce", dtype, size + 1, std::string(op.name()) + " with a NaN per rank"));
      Guarded one(dtype, size + 1, input, p);
      ReduceOptions r;
      r.op = op;
      r.root = size - 1;
      pg.reduce(one.view(), r)->wait();
      if (me == size - 1) {
        one.check(expected, describe("reduce", dtype, size + 1, std::string(op.name()) + " with a NaN per rank"));
      }
    }
  }
}

// MIN and MAX of zeros: -0 is below +0, whichever rank holds which and in whatever order a
// backend combines them (an outside user found shm, gloo, mpi and hier each keeping a
// different zero, and all_reduce and reduce_scatter differing on one backend). Element k
// holds -0 on rank r where bit r of k is set, +0 elsewhere: every pattern of signs.
void check_signed_zeros_in_min_max(ProcessGroup& pg, const Placement& p) {
  const int me = pg.rank();
  const int bits = std::min(pg.size(), 6);
  const int64_t count = int64_t{1} << bits;
  const int64_t all_negative = count - 1;
  auto input = [&](int64_t k) { return me < bits && ((k >> me) & 1) ? -0.0 : 0.0; };
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::MIN, ReduceOp::MAX}) {
      // Ranks from `bits` on hold +0: with more than 6 ranks no pattern is all -0 for MAX.
      const bool every_rank_patterned = pg.size() <= bits;
      auto expected = [&](int64_t k) {
        if (op.kind == ReduceOp::MIN) return k != 0 ? -0.0 : 0.0;
        return k == all_negative && every_rank_patterned ? -0.0 : 0.0;
      };
      const std::string more = std::string(op.name()) + " of +0 and -0";
      Guarded all(dtype, count, input, p);
      AllReduceOptions a;
      a.op = op;
      pg.all_reduce(all.view(), a)->wait();
      all.check(expected, describe("all_reduce", dtype, count, more), 0, /*signed_zeros=*/true);
      Guarded one(dtype, count, input, p);
      ReduceOptions r;
      r.op = op;
      r.root = pg.size() - 1;
      pg.reduce(one.view(), r)->wait();
      if (me == pg.size() - 1) one.check(expected, describe("reduce", dtype, count, more), 0, /*signed_zeros=*/true);
    }
  }
}

void check_avg_near_the_top_of_16bit_ranges(ProcessGroup& pg, const Placement& p) {
  const int size = pg.size();
  // Every rank holds v, whose sum over the ranks leaves the type's range (float16's largest
  // is 65504, bfloat16's about 3.39e38): the average is v all the same (avg_scales_inputs).
  struct Case {
    DType dtype;
    double v;
    const char* text;
  };
  for (const Case& c : {Case{DType::kFloat16, 30000, "30000"}, Case{DType::kBFloat16, 3e38, "3e38"}}) {
    const DType dtype = c.dtype;
    const double v = c.v;
    const std::string more = std::string("avg of ") + c.text + " on every rank";
    // float16/bfloat16 round v / size once per rank and the sum once per step.
    const double tol = 1.0 / 64;
    Guarded all(dtype, 3, [&](int64_t) { return v; }, p);
    AllReduceOptions a;
    a.op = ReduceOp::AVG;
    pg.all_reduce(all.view(), a)->wait();
    all.check([&](int64_t) { return v; }, describe("all_reduce", dtype, 3, more), tol);
    Guarded one(dtype, 3, [&](int64_t) { return v; }, p);
    ReduceOptions r;
    r.op = ReduceOp::AVG;
    r.root = size - 1;
    pg.reduce(one.view(), r)->wait();
    if (pg.rank() == size - 1) one.check([&](int64_t) { return v; }, describe("reduce", dtype, 3, more), tol);
    Guarded out(dtype, 2, [&](int64_t) { return 0.0; }, p);
    Tensor input = p.to_device(host_tensor(dtype, {2 * size}, [&](int64_t) { return v; }));
    ReduceScatterOptions rs;
    rs.op = ReduceOp::AVG;
    pg.reduce_scatter_tensor(out.view(), input, rs)->wait();
    out.check([&](int64_t) { return v; }, describe("reduce_scatter_tensor", dtype, 2, more), tol);
  }
}

void check_integer_sums_wrap(ProcessGroup& pg, const Placement& p) {
  const int size = pg.size();
  // Every rank holds v; the sum over the ranks wraps in the type (two's complement), as in
  // torch and NCCL. Counts from 16 up reach vectorised kernels (Open MPI's op/avx saturated
  // 8-bit sums from 16 elements: helper-87).
  struct Case {
    DType dtype;
    double v;
    double sum;
  };
  const Case cases[] = {
      {DType::kUInt8, 200, static_cast<double>(static_cast<uint8_t>(200 * size))},
      {DType::kInt8, 100, static_cast<double>(static_cast<int8_t>(static_cast<uint8_t>(100 * size)))},
  };
  for (const Case& c : cases) {
    for (int64_t count : {int64_t{1}, int64_t{64}, int64_t{4099}}) {
      const std::string more = "sum of " + std::to_string(static_cast<int>(c.v)) + " on every rank";
      Guarded all(c.dtype, count, [&](int64_t) { return c.v; }, p);
      pg.all_reduce(all.view())->wait();
      all.check([&](int64_t) { return c.sum; }, describe("all_reduce", c.dtype, count, more));
      Guarded one(c.dtype, count, [&](int64_t) { return c.v; }, p);
      ReduceOptions r;
      r.root = size - 1;
      pg.reduce(one.view(), r)->wait();
      if (pg.rank() == size - 1) one.check([&](int64_t) { return c.sum; }, describe("reduce", c.dtype, count, more));
      Guarded out(c.dtype, count, [&](int64_t) { return 0.0; }, p);
      Tensor input = p.to_device(host_tensor(c.dtype, {count * size}, [&](int64_t) { return c.v; }));
      pg.reduce_scatter_tensor(out.view(), input)->wait();
      out.check([&](int64_t) { return c.sum; }, describe("reduce_scatter_tensor", c.dtype, count, more));
    }
  }
}

void check_broadcast(ProcessGroup& pg, DType dtype, int64_t count, int root, const Placement& p) {
  const std::string what = describe("broadcast", dtype, count, root_str(root));
  const int me = pg.rank();
  Guarded t(dtype, count, [&](int64_t i) { return me == root ? rank_value(dtype, root, i) : junk_value(dtype, me, i); },
            p);
  BroadcastOptions o;
  o.root = root;
  pg.broadcast(t.view(), o)->wait();
  t.check([&](int64_t i) { return rank_value(dtype, root, i); }, what);
}

void check_reduce(ProcessGroup& pg, DType dtype, ReduceOp op, int64_t count, int root, const Placement& p) {
  const std::string what = describe("reduce", dtype, count, std::string(op.name()) + " " + root_str(root));
  const int me = pg.rank();
  Guarded t(dtype, count, [&](int64_t i) { return reduce_input(dtype, op, me, i); }, p);
  ReduceOptions o;
  o.op = op;
  o.root = root;
  pg.reduce(t.view(), o)->wait();
  if (me == root) {
    t.check([&](int64_t i) { return reduce_expected(dtype, op, pg.size(), i); }, what, reduce_tolerance(dtype, op));
  } else {
    t.check([&](int64_t i) { return reduce_input(dtype, op, me, i); }, what + " (non-root tensor must not change)");
  }
}

void check_all_gather(ProcessGroup& pg, DType dtype, int64_t count, Layout layout, const Placement& p) {
  const int me = pg.rank();
  const int size = pg.size();
  auto gathered = [&](int64_t i) { return rank_value(dtype, static_cast<int>(i / count), i % count); };
  if (layout == Layout::kList) {
    const std::string what = describe("all_gather(list)", dtype, count);
    Tensor input = p.to_device(host_tensor(dtype, {count}, [&](int64_t i) { return rank_value(dtype, me, i); }));
    std::vector<Tensor> outputs = device_list(size, dtype, count, p, [&](int, int64_t i) { return junk_value(dtype, me, i); });
    pg.all_gather(outputs, input)->wait();
    for (int r = 0; r < size; ++r) {
      expect_elements(p.to_host(outputs[static_cast<size_t>(r)]), [&](int64_t i) { return rank_value(dtype, r, i); },
                      what + " outputs[" + std::to_string(r) + "]");
    }
    return;
  }
  const bool in_place = layout == Layout::kInPlace;
  const std::string what = describe(in_place ? "all_gather_into_tensor(in place)" : "all_gather_into_tensor", dtype, count);
  Guarded output(dtype, count * size, [&](int64_t i) {
    return in_place && i / count == me ? rank_value(dtype, me, i % count) : junk_value(dtype, me, i);
  }, p);
  Tensor input = in_place ? output.view().flat_slice(me * count, count)
                          : p.to_device(host_tensor(dtype, {count}, [&](int64_t i) { return rank_value(dtype, me, i); }));
  pg.all_gather_into_tensor(output.view(), input)->wait();
  output.check(gathered, what);
}

void check_gather(ProcessGroup& pg, DType dtype, int64_t count, int root, const Placement& p) {
  const std::string what = describe("gather", dtype, count, root_str(root));
  const int me = pg.rank();
  Tensor input = p.to_device(host_tensor(dtype, {count}, [&](int64_t i) { return rank_value(dtype, me, i); }));
  std::vector<Tensor> outputs;
  if (me == root) outputs = device_list(pg.size(), dtype, count, p, [&](int, int64_t i) { return junk_value(dtype, me, i); });
  GatherOptions o;
  o.root = root;
  pg.gather(outputs, input, o)->wait();
  for (size_t r = 0; r < outputs.size(); ++r) {
    expect_elements(p.to_host(outputs[r]), [&](int64_t i) { return rank_value(dtype, static_cast<int>(r), i); },
                    what + " outputs[" + std::to_string(r) + "]");
  }
}

void check_lists_of_views(ProcessGroup& pg, int64_t count) {
  const int size = pg.size(), me = pg.rank(), root = size - 1;
  for (bool reversed : {false, true}) {
    const std::string order = reversed ? " (views of one buffer, reversed)" : " (views of one buffer)";
    Tensor buffer = Tensor::zeros({count * size});
    std::vector<Tensor> views;
    for (int r = 0; r < size; ++r) views.push_back(buffer.flat_slice((reversed ? size - 1 - r : r) * count, count));
    auto expect_blocks = [&](const std::string& what, const std::function<double(int, int64_t)>& value) {
      for (int r = 0; r < size; ++r) {
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(views[static_cast<size_t>(r)].item(i), value(r, i)) << what << order << ": block " << r << " element " << i;
        }
      }
    };
    Tensor input = Tensor::zeros({count});
    for (int64_t i = 0; i < count; ++i) input.set_item(i, 1000 * me + i % 997);
    pg.all_gather(views, input)->wait();
    expect_blocks("all_gather(list)", [](int r, int64_t i) { return 1000 * r + i % 997; });

    // The input is another rank's block of the list (aliasing the output): the op must
    // still read it whole before any block lands.
    if (size > 1) {
      Tensor& aliased = views[static_cast<size_t>((me + 1) % size)];
      aliased.copy_from(input);
      pg.all_gather(views, aliased)->wait();
      expect_blocks("all_gather(list) from a block of its own list", [](int r, int64_t i) { return 1000 * r + i % 997; });
    }

    buffer.fill(-1);
    GatherOptions g;
    g.root = root;
    std::vector<Tensor> outputs = me == root ? views : std::vector<Tensor>{};
    pg.gather(outputs, input, g)->wait();
    if (me == root) expect_blocks("gather", [](int r, int64_t i) { return 1000 * r + i % 997; });

    for (int r = 0; r < size; ++r) views[static_cast<size_t>(r)].fill(7 * r + 1);
    ScatterOptions s;
    s.root = root;
    Tensor output = Tensor::zeros({count});
    std::vector<Tensor> inputs = me == root ? views : std::vector<Tensor>{};
    pg.scatter(output, inputs, s)->wait();
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(output.item(i), 7 * me + 1) << "scatter" << order << ": element " << i;
  }
}

void check_scatter(ProcessGroup& pg, DType dtype, int64_t count, int root, const Placement& p) {
  const std::string what = describe("scatter", dtype, count, root_str(root));
  const int me = pg.rank();
  // The data depends on the root too, so that a scatter from the wrong root shows.
  auto block_value = [&](int dst, int64_t i) { return data_value(dtype, root * 53 + dst * 1009 + i * 3 + 2); };
  std::vector<Tensor> inputs;
  if (me == root) inputs = device_list(pg.size(), dtype, count, p, block_value);
  Guarded output(dtype, count, [&](int64_t i) { return junk_value(dtype, me, i); }, p);
  ScatterOptions o;
  o.root = root;
  pg.scatter(output.view(), inputs, o)->wait();
  output.check([&](int64_t i) { return block_value(me, i); }, what);
}

void check_reduce_scatter(ProcessGroup& pg, DType dtype, ReduceOp op, int64_t count, Layout layout,
                          const Placement& p) {
  const bool list = layout == Layout::kList;
  const std::string what = describe(list ? "reduce_scatter(list)" : "reduce_scatter_tensor", dtype, count, op.name());
  const int me = pg.rank();
  const int size = pg.size();
  Guarded output(dtype, count, [&](int64_t i) { return data_value(dtype, i + 3); }, p);
  ReduceScatterOptions o;
  o.op = op;
  if (list) {
    std::vector<Tensor> inputs = device_list(size, dtype, count, p, [&](int block, int64_t i) {
      return reduce_input(dtype, op, me, block * count + i);
    });
    pg.reduce_scatter(output.view(), inputs, o)->wait();
  } else {
    Tensor input = p.to_device(host_tensor(dtype, {count * size}, [&](int64_t j) { return reduce_input(dtype, op, me, j); }));
    pg.reduce_scatter_tensor(output.view(), input, o)->wait();
  }
  output.check([&](int64_t i) { return reduce_expected(dtype, op, size, me * count + i); }, what,
               reduce_tolerance(dtype, op));
}

namespace {

// Rows rank `src` sends to rank `dst` in check_all_to_all_single.
int64_t a2a_rows(int src, int dst, int64_t rows_per_peer, bool uneven) {
  return uneven ? (src + 2 * dst + rows_per_peer) % 3 : rows_per_peer;
}

// Element (row, col) of the block src sends to dst, row width 2.
double a2a_value(DType dtype, int src, int dst, int64_t row, int col) {
  return data_value(dtype, src * 1009 + dst * 101 + row * 2 + col + 1);
}

// all_to_all_single on [rows, 2] tensors, rank src sending rows(src, dst) rows to rank dst;
// with_splits: the split sizes are passed (else the rows must be even); in_place: the output
// is the input (each rank must then receive as many rows as it sends).
void check_all_to_all_rows(ProcessGroup& pg, DType dtype, const std::function<int64_t(int, int)>& rows,
                           bool with_splits, const std::string& what, const Placement& p, bool in_place = false) {
  const int me = pg.rank();
  const int size = pg.size();
  std::vector<int64_t> in_splits, out_splits;
  for (int r = 0; r < size; ++r) {
    in_splits.push_back(rows(me, r));
    out_splits.push_back(rows(r, me));
  }
  // Flattened contents of both sides, block by block in rank order.
  std::vector<double> in_values, expected;
  for (int r = 0; r < size; ++r) {
    for (int64_t row = 0; row < in_splits[static_cast<size_t>(r)]; ++row) {
      for (int col = 0; col < 2; ++col) in_values.push_back(a2a_value(dtype, me, r, row, col));
    }
    for (int64_t row = 0; row < out_splits[static_cast<size_t>(r)]; ++row) {
      for (int col = 0; col < 2; ++col) expected.push_back(a2a_value(dtype, r, me, row, col));
    }
  }
  const auto in_rows = static_cast<int64_t>(in_values.size() / 2);
  const auto out_rows = static_cast<int64_t>(expected.size() / 2);
  Tensor input = p.to_device(host_tensor(dtype, {in_rows, 2}, [&](int64_t i) { return in_values[static_cast<size_t>(i)]; }));
  Tensor output = in_place ? input
                           : p.to_device(host_tensor(dtype, {out_rows, 2}, [&](int64_t i) { return junk_value(dtype, me, i); }));
  if (with_splits) {
    pg.all_to_all_single(output, input, out_splits, in_splits)->wait();
  } else {
    pg.all_to_all_single(output, input)->wait();
  }
  expect_elements(p.to_host(output), [&](int64_t i) { return expected[static_cast<size_t>(i)]; }, what);
}

}  // namespace

void check_all_to_all_single(ProcessGroup& pg, DType dtype, int64_t rows_per_peer, bool uneven, const Placement& p) {
  check_all_to_all_rows(
      pg, dtype, [&](int src, int dst) { return a2a_rows(src, dst, rows_per_peer, uneven); }, uneven,
      describe("all_to_all_single", dtype, rows_per_peer, uneven ? "uneven" : "even"), p);
}

void check_all_to_all_idle_rank(ProcessGroup& pg, DType dtype, int64_t rows_per_peer, const Placement& p) {
  const int idle = pg.size() - 1;
  check_all_to_all_rows(
      pg, dtype, [&](int src, int dst) { return src == idle || dst == idle ? 0 : rows_per_peer; }, true,
      describe("all_to_all_single", dtype, rows_per_peer, "last rank idle"), p);
}

void check_all_to_all_in_place(ProcessGroup& pg, DType dtype, int64_t rows_per_peer, const Placement& p) {
  check_all_to_all_rows(
      pg, dtype, [&](int, int) { return rows_per_peer; }, false,
      describe("all_to_all_single", dtype, rows_per_peer, "in place, even"), p, /*in_place=*/true);
  // Rank s sends (s - d) mod size + rows_per_peer rows to d: every rank sends and receives
  // the same total, in blocks of other sizes, so a block received early lands on rows not
  // yet sent (gloo overwrote them with 3 ranks or more: helper-69).
  const int size = pg.size();
  check_all_to_all_rows(
      pg, dtype, [&](int src, int dst) { return (src - dst + size) % size + rows_per_peer; }, true,
      describe("all_to_all_single", dtype, rows_per_peer, "in place, skewed splits"), p, /*in_place=*/true);
}

void check_all_to_all_list(ProcessGroup& pg, DType dtype, int64_t extra, const Placement& p) {
  const std::string what = describe("all_to_all(list)", dtype, extra);
  const int me = pg.rank();
  const int size = pg.size();
  auto elements = [&](int src, int dst) { return static_cast<int64_t>((src + 2 * dst) % 3) + extra; };
  auto value = [&](int src, int dst, int64_t k) { return data_value(dtype, src * 1009 + dst * 101 + k + 1); };
  std::vector<Tensor> inputs, outputs;
  for (int r = 0; r < size; ++r) {
    inputs.push_back(p.to_device(host_tensor(dtype, {elements(me, r)}, [&](int64_t k) { return value(me, r, k); })));
    outputs.push_back(p.to_device(host_tensor(dtype, {elements(r, me)}, [&](int64_t k) { return junk_value(dtype, me, k); })));
  }
  pg.all_to_all(outputs, inputs)->wait();
  for (int r = 0; r < size; ++r) {
    expect_elements(p.to_host(outputs[static_cast<size_t>(r)]), [&](int64_t k) { return value(r, me, k); },
                    what + " outputs[" + std::to_string(r) + "]");
  }
}

}  // namespace conformance
}  // namespace distcomm
