// Conformance checks of coalescing, ops in flight, subgroups and argument validation.
#include <algorithm>
#include <chrono>
#include <functional>

#include <gtest/gtest.h>

#include "api/device_mesh.h"
#include "api/errors.h"
#include "tests/backends/conformance/conformance.h"
#include "tests/backends/conformance/conformance_values.h"

namespace distcomm {
namespace conformance {

using internal::expect_elements;
using internal::host_tensor;
using internal::reduce_expected;
using internal::reduce_input;
using internal::reduce_tolerance;

void check_all_reduce_coalesced(ProcessGroup& pg, DType dtype, ReduceOp op, const Placement& p) {
  const std::string what = std::string("all_reduce_coalesced ") + dtype_name(dtype) + " " + op.name();
  const std::vector<std::vector<int64_t>> shapes = {{3}, {2, 4}, {1}, {0}, {5}};
  std::vector<Tensor> tensors;
  std::vector<int64_t> offsets;  // where each tensor's elements sit in the packed buffer
  int64_t offset = 0;
  for (const auto& shape : shapes) {
    offsets.push_back(offset);
    Tensor t = host_tensor(dtype, shape, [&](int64_t i) { return reduce_input(dtype, op, pg.rank(), offset + i); });
    offset += t.numel();
    tensors.push_back(p.to_device(t));
  }
  AllReduceOptions o;
  o.op = op;
  pg.all_reduce_coalesced(tensors, o)->wait();
  for (size_t k = 0; k < tensors.size(); ++k) {
    EXPECT_EQ(tensors[k].shape(), shapes[k]) << what << ": tensor " << k << " changed shape";
    expect_elements(p.to_host(tensors[k]),
                    [&](int64_t i) { return reduce_expected(dtype, op, pg.size(), offsets[k] + i); },
                    what + " tensor " + std::to_string(k), reduce_tolerance(dtype, op));
  }
}

void check_many_in_flight(ProcessGroup& pg, int n, int64_t count, const Placement& p) {
  const DType dtype = DType::kFloat32;
  const ReduceOp op = ReduceOp::SUM;
  std::vector<Tensor> tensors;
  std::vector<WorkPtr> works;
  for (int k = 0; k < n; ++k) {
    tensors.push_back(p.to_device(host_tensor(dtype, {count}, [&](int64_t i) { return reduce_input(dtype, op, pg.rank(), i + k); })));
  }
  for (int k = 0; k < n; ++k) works.push_back(pg.all_reduce(tensors[static_cast<size_t>(k)]));
  for (int k = n - 1; k >= 0; --k) works[static_cast<size_t>(k)]->wait();
  for (int k = 0; k < n; ++k) {
    if (k > 0) {
      EXPECT_LT(works[k - 1]->seq(), works[k]->seq()) << "sequence numbers follow issue order";
    }
    expect_elements(p.to_host(tensors[static_cast<size_t>(k)]),
                    [&](int64_t i) { return reduce_expected(dtype, op, pg.size(), i + k); },
                    "all_reduce " + std::to_string(k) + " of " + std::to_string(n) + " in flight");
  }
}

namespace {

// all_reduce and all_gather of the world ranks of sub's members: checks membership, order
// and that the subgroup's ops run among its members only.
void check_members(ProcessGroup& sub, int world_rank, const std::vector<int>& members, const std::string& what) {
  ASSERT_EQ(sub.size(), static_cast<int>(members.size())) << what;
  const auto me = std::find(members.begin(), members.end(), world_rank) - members.begin();
  EXPECT_EQ(sub.rank(), me) << what << ": rank in the subgroup";
  Tensor sum = Tensor::of<int64_t>({world_rank});
  sub.all_reduce(sum)->wait();
  int64_t want = 0;
  for (int r : members) want += r;
  EXPECT_EQ(sum.item(0), want) << what << ": all_reduce over the members";
  Tensor gathered = Tensor::zeros({sub.size()}, DType::kInt64);
  sub.all_gather_into_tensor(gathered, Tensor::of<int64_t>({world_rank}))->wait();
  expect_elements(gathered, [&](int64_t i) { return members[static_cast<size_t>(i)]; }, what + ": all_gather of world ranks");
}

void check_world_still_works(ProcessGroup& pg, const std::string& what) {
  Tensor t = Tensor::of<int32_t>({1});
  pg.all_reduce(t)->wait();
  EXPECT_EQ(t.item(0), pg.size()) << what << ": all_reduce on the parent group afterwards";
}

}  // namespace

void check_new_group(ProcessGroup& pg) {
  std::vector<int> evens, odds;
  for (int r = 0; r < pg.size(); ++r) (r % 2 ? odds : evens).push_back(r);
  auto even_group = pg.new_group(evens);
  auto odd_group = odds.empty() ? nullptr : pg.new_group(odds);
  const bool even = pg.rank() % 2 == 0;
  ProcessGroupPtr mine = even ? even_group : odd_group;
  ProcessGroupPtr other = even ? odd_group : even_group;
  ASSERT_NE(mine, nullptr) << "new_group: a member got no group";
  EXPECT_EQ(other, nullptr) << "new_group: a rank outside the group got one";
  // Both subgroups run at the same time, each among its own members only.
  check_members(*mine, pg.rank(), even ? evens : odds, even ? "new_group(evens)" : "new_group(odds)");
  mine.reset();
  check_world_still_works(pg, "new_group");
}

void check_split(ProcessGroup& pg) {
  const int size = pg.size();
  const bool opt_out = size >= 3 && pg.rank() == size - 1;
  const int color = opt_out ? -1 : pg.rank() % 2;
  auto sub = pg.split(color, -pg.rank());
  if (opt_out) {
    EXPECT_EQ(sub, nullptr) << "split with a negative color must give no group";
  } else {
    ASSERT_NE(sub, nullptr) << "split: no group for color " << color;
    std::vector<int> members;  // ordered by key = -rank: descending ranks
    for (int r = size - 1; r >= 0; --r) {
      if (r % 2 == color && !(size >= 3 && r == size - 1)) members.push_back(r);
    }
    check_members(*sub, pg.rank(), members, "split(color " + std::to_string(color) + ", key -rank)");
  }
  sub.reset();
  check_world_still_works(pg, "split");
}

void check_split_group(ProcessGroup& pg) {
  const int size = pg.size();
  const int left_out = size >= 3 ? size - 1 : -1;
  std::vector<int> evens, odds;  // evens descending, odds ascending: order is the lists'
  for (int r = size - 1; r >= 0; --r) {
    if (r % 2 == 0 && r != left_out) evens.push_back(r);
  }
  for (int r = 0; r < size; ++r) {
    if (r % 2 == 1 && r != left_out) odds.push_back(r);
  }
  std::vector<std::vector<int>> lists{evens};
  if (!odds.empty()) lists.push_back(odds);
  auto sub = pg.split_group(lists);
  if (pg.rank() == left_out) {
    EXPECT_EQ(sub, nullptr) << "split_group: a rank in no list must get no group";
  } else {
    ASSERT_NE(sub, nullptr) << "split_group: no group for rank " << pg.rank();
    const bool even = pg.rank() % 2 == 0;
    check_members(*sub, pg.rank(), even ? evens : odds, even ? "split_group(evens)" : "split_group(odds)");
  }
  sub.reset();
  if (size >= 2) {
    // The same lists on every rank, overlapping: refused everywhere, nothing made.
    try {
      pg.split_group({{0, 1}, {1}});
      ADD_FAILURE() << "split_group with overlapping lists did not throw";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 is in split_ranks[0] and split_ranks[1]"), std::string::npos)
          << e.what();
    }
  }
  check_world_still_works(pg, "split_group");
}

void check_device_mesh(ProcessGroup& pg, const std::vector<int>& shape) {
  ASSERT_EQ(shape.size(), 2u) << "check_device_mesh takes a 2-D shape";
  const int rows = shape[0], cols = shape[1];
  ASSERT_EQ(rows * cols, pg.size()) << "check_device_mesh: the shape must hold the group";
  const std::string what = "DeviceMesh {" + std::to_string(rows) + ", " + std::to_string(cols) + "}";
  const int me = pg.rank();
  DeviceMesh mesh(pg.shared_from_this(), shape, {"dp", "tp"});
  EXPECT_EQ(mesh.shape(), shape) << what;
  EXPECT_EQ(mesh.coordinate(), (std::vector<int>{me / cols, me % cols})) << what << ": coordinate";
  std::vector<int> row, column;  // the world ranks of my "tp" group and of my "dp" group
  for (int c = 0; c < cols; ++c) row.push_back(me / cols * cols + c);
  for (int r = 0; r < rows; ++r) column.push_back(r * cols + me % cols);
  EXPECT_EQ(mesh["tp"].ranks(), row) << what << ": mesh[\"tp\"] ranks";
  EXPECT_EQ(mesh["dp"].ranks(), column) << what << ": mesh[\"dp\"] ranks";
  EXPECT_EQ(mesh.local_rank("tp"), me % cols) << what;
  EXPECT_EQ(mesh["dp"].coordinate(), (std::vector<int>{me / cols})) << what;
  check_members(*mesh.group("tp"), me, row, what + " group tp");
  check_members(*mesh.group("dp"), me, column, what + " group dp");

  // Both dimensions' ops in flight at once, each exact: a float32 row sum and a column sum.
  Tensor along_tp = Tensor::of<float>({1.0f * me, 1.0f});
  Tensor along_dp = Tensor::of<float>({2.0f * me, 1.0f});
  WorkPtr tp_work = mesh.group("tp")->all_reduce(along_tp);
  WorkPtr dp_work = mesh.group("dp")->all_reduce(along_dp);
  dp_work->wait();
  tp_work->wait();
  double row_sum = 0, column_sum = 0;
  for (int r : row) row_sum += r;
  for (int r : column) column_sum += 2.0 * r;
  EXPECT_EQ(along_tp.item(0), row_sum) << what << ": all_reduce along tp";
  EXPECT_EQ(along_tp.item(1), cols) << what << ": all_reduce along tp";
  EXPECT_EQ(along_dp.item(0), column_sum) << what << ": all_reduce along dp";
  EXPECT_EQ(along_dp.item(1), rows) << what << ": all_reduce along dp";

  // A slice in the other order, then flattened: members in (tp, dp) row-major order.
  DeviceMesh swapped = mesh.slice({"tp", "dp"});
  EXPECT_EQ(swapped.shape(), (std::vector<int>{cols, rows})) << what;
  EXPECT_EQ(swapped.coordinate(), (std::vector<int>{me % cols, me / cols})) << what;
  DeviceMesh all = mesh.flatten("dp_tp");
  DeviceMesh all_swapped = swapped.flatten("tp_dp");
  std::vector<int> every, every_swapped;
  for (int r = 0; r < pg.size(); ++r) every.push_back(r);
  for (int c = 0; c < cols; ++c) {
    for (int r = 0; r < rows; ++r) every_swapped.push_back(r * cols + c);
  }
  EXPECT_EQ(all.ranks(), every) << what;
  check_members(*all.group("dp_tp"), me, every, what + " flatten(dp_tp)");
  check_members(*all_swapped.group("tp_dp"), me, every_swapped, what + " flatten of slice {tp, dp}");
  EXPECT_EQ(mesh["dp_tp"].size(), pg.size()) << what << ": a flattened dimension is known to the mesh";
  EXPECT_THROW(mesh.flatten("dp_tp"), InvalidArgument) << what << ": flatten to a name taken";
  EXPECT_THROW(mesh["pp"], InvalidArgument) << what << ": an unknown dimension";
  EXPECT_THROW(mesh["tp"].group("dp"), InvalidArgument) << what << ": a dimension outside the slice";
  check_world_still_works(pg, what);
}

namespace {

// Expects call() to throw InvalidArgument whose message holds `needle`. Should it issue an
// op instead, waits for it (within 5 s) so that a failing check does not hang the suite.
void expect_refused(const std::function<WorkPtr()>& call, const std::string& needle, const std::string& what) {
  WorkPtr issued;
  try {
    issued = call();
    ADD_FAILURE() << what << ": not refused (issued to the backend)";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << what << ": " << e.what();
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw something else than InvalidArgument: " << e.what();
    return;
  }
  try {
    if (issued) issued->wait(std::chrono::seconds(5));
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": the op it issued failed: " << e.what();
  }
}

// Every op with a timeout option of 0 ms, and every reducing op with a ReduceOp whose kind
// is not a ReduceOp::Kind: refused by the call, before anything is sent. Every other
// argument is valid, so that the refusal is for these alone.
void refuse_zero_timeouts_and_bad_reduce_ops(ProcessGroup& pg) {
  const int size = pg.size();
  const int me = pg.rank();
  const std::string zero = "option timeout=0 ms: give a positive timeout, or kUseDefault for the group's";
  const std::chrono::milliseconds kZero(0);
  Tensor f = Tensor::zeros({4});
  Tensor whole = Tensor::zeros({4 * size});
  std::vector<Tensor> list;
  for (int r = 0; r < size; ++r) list.push_back(Tensor::zeros({4}));
  std::vector<Tensor> outputs = list;
  {
    AllReduceOptions o;
    o.timeout = kZero;
    expect_refused([&] { return pg.all_reduce(f, o); }, "all_reduce: " + zero, "all_reduce timeout 0");
    std::vector<Tensor> ts = {Tensor::zeros({2}), Tensor::zeros({3})};
    expect_refused([&] { return pg.all_reduce_coalesced(ts, o); }, "all_reduce_coalesced: " + zero,
                   "all_reduce_coalesced timeout 0");
  }
  {
    BroadcastOptions o;
    o.timeout = kZero;
    expect_refused([&] { return pg.broadcast(f, o); }, "broadcast: " + zero, "broadcast timeout 0");
  }
  {
    ReduceOptions o;
    o.timeout = kZero;
    expect_refused([&] { return pg.reduce(f, o); }, "reduce: " + zero, "reduce timeout 0");
  }
  {
    AllGatherOptions o;
    o.timeout = kZero;
    expect_refused([&] { return pg.all_gather_into_tensor(whole, f, o); }, "all_gather: " + zero,
                   "all_gather_into_tensor timeout 0");
    expect_refused([&] { return pg.all_gather(outputs, f, o); }, "all_gather: " + zero, "all_gather timeout 0");
  }
  {
    GatherOptions o;
    o.timeout = kZero;
    std::vector<Tensor> gathered = me == 0 ? outputs : std::vector<Tensor>();
    expect_refused([&] { return pg.gather(gathered, f, o); }, "gather: " + zero, "gather timeout 0");
  }
  {
    ScatterOptions o;
    o.timeout = kZero;
    std::vector<Tensor> scattered = me == 0 ? list : std::vector<Tensor>();
    expect_refused([&] { return pg.scatter(f, scattered, o); }, "scatter: " + zero, "scatter timeout 0");
  }
  {
    ReduceScatterOptions o;
    o.timeout = kZero;
    expect_refused([&] { return pg.reduce_scatter_tensor(f, whole, o); }, "reduce_scatter: " + zero,
                   "reduce_scatter_tensor timeout 0");
    expect_refused([&] { return pg.reduce_scatter(f, list, o); }, "reduce_scatter: " + zero,
                   "reduce_scatter timeout 0");
  }
  {
    AllToAllOptions o;
    o.timeout = kZero;
    Tensor out = Tensor::zeros({4 * size});
    expect_refused([&] { return pg.all_to_all_single(out, whole, {}, {}, o); }, "all_to_all: " + zero,
                   "all_to_all_single timeout 0");
    expect_refused([&] { return pg.all_to_all(outputs, list, o); }, "all_to_all: " + zero, "all_to_all timeout 0");
  }
  {
    BarrierOptions o;
    o.timeout = kZero;
    expect_refused([&] { return pg.barrier(o); }, "barrier: " + zero, "barrier timeout 0");
  }
  if (size > 1) {
    P2POptions o;
    o.timeout = kZero;
    const int next = (me + 1) % size;
    const int prev = (me + size - 1) % size;
    expect_refused([&] { return pg.send(f, next, o); }, "send: " + zero, "send timeout 0");
    expect_refused([&] { return pg.recv(f, prev, o); }, "recv: " + zero, "recv timeout 0");
    expect_refused([&] { return pg.recv_any_source(f, o); }, "recv_any_source: " + zero, "recv_any_source timeout 0");
    std::vector<P2POp> batch = {P2POp::send(f, next), P2POp::recv(Tensor::zeros({4}), prev)};
    expect_refused([&] { return pg.batch_isend_irecv(batch, o); }, "batch_isend_irecv: " + zero,
                   "batch_isend_irecv timeout 0");
  }
  // A kind cast from a stray integer.
  ReduceOp bad;
  bad.kind = static_cast<ReduceOp::Kind>(42);
  const std::string bad_kind = "argument 'op' has kind 42, which is not a ReduceOp::Kind";
  {
    AllReduceOptions o;
    o.op = bad;
    expect_refused([&] { return pg.all_reduce(f, o); }, "all_reduce: " + bad_kind, "all_reduce op kind 42");
    std::vector<Tensor> ts = {Tensor::zeros({2}), Tensor::zeros({3})};
    expect_refused([&] { return pg.all_reduce_coalesced(ts, o); }, "all_reduce_coalesced: " + bad_kind,
                   "all_reduce_coalesced op kind 42");
  }
  {
    ReduceOptions o;
    o.op = bad;
    expect_refused([&] { return pg.reduce(f, o); }, "reduce: " + bad_kind, "reduce op kind 42");
  }
  {
    ReduceScatterOptions o;
    o.op = bad;
    expect_refused([&] { return pg.reduce_scatter_tensor(f, whole, o); }, "reduce_scatter: " + bad_kind,
                   "reduce_scatter_tensor op kind 42");
    expect_refused([&] { return pg.reduce_scatter(f, list, o); }, "reduce_scatter: " + bad_kind,
                   "reduce_scatter op kind 42");
  }
}

}  // namespace

void check_invalid_arguments(ProcessGroup& pg) {
  const int size = pg.size();
  const int me = pg.rank();
  const uint64_t seq_before = pg.next_seq();
  if (me == 0) {
    refuse_zero_timeouts_and_bad_reduce_ops(pg);
    Tensor f = Tensor::zeros({4});
    Tensor i32 = Tensor::zeros({4}, DType::kInt32);
    BroadcastOptions bad_root;
    bad_root.root = size;
    EXPECT_THROW(pg.broadcast(f, bad_root), InvalidArgument) << "broadcast root == size()";
    bad_root.root = -1;
    EXPECT_THROW(pg.broadcast(f, bad_root), InvalidArgument) << "broadcast root -1";
    ReduceOptions bad_reduce_root;
    bad_reduce_root.root = size + 3;
    EXPECT_THROW(pg.reduce(f, bad_reduce_root), InvalidArgument) << "reduce root out of range";
    AllReduceOptions bxor;
    bxor.op = ReduceOp::BXOR;
    EXPECT_THROW(pg.all_reduce(f, bxor), InvalidArgument) << "bxor on float32";
    AllReduceOptions premul;
    premul.op = ReduceOp::premul_sum(0.5);
    EXPECT_THROW(pg.all_reduce(i32, premul), InvalidArgument) << "premul_sum on int32";
    Tensor undefined;
    EXPECT_THROW(pg.all_reduce(undefined), InvalidArgument) << "undefined tensor";
    Tensor too_big = Tensor::zeros({4 * size + 1});
    EXPECT_THROW(pg.all_gather_into_tensor(too_big, f), InvalidArgument) << "all_gather output of the wrong size";
    Tensor right_size_int = Tensor::zeros({4 * size}, DType::kInt32);
    EXPECT_THROW(pg.all_gather_into_tensor(right_size_int, f), InvalidArgument) << "all_gather dtype mismatch";
    std::vector<Tensor> one_too_many(static_cast<size_t>(size + 1), Tensor::zeros({4}));
    EXPECT_THROW(pg.all_gather(one_too_many, f), InvalidArgument) << "all_gather list of size()+1";
    std::vector<Tensor> mismatched(static_cast<size_t>(size), Tensor::zeros({5}));
    EXPECT_THROW(pg.all_gather(mismatched, f), InvalidArgument) << "all_gather outputs shaped unlike the input";
    Tensor rs_input = Tensor::zeros({4 * size + 2});
    EXPECT_THROW(pg.reduce_scatter_tensor(f, rs_input), InvalidArgument) << "reduce_scatter input of the wrong size";
    EXPECT_THROW(pg.send(f, me), InvalidArgument) << "send to itself";
    EXPECT_THROW(pg.send(f, size), InvalidArgument) << "send to a rank outside the group";
    if (size > 1) {
      P2POptions negative;
      negative.tag = -1;
      EXPECT_THROW(pg.send(f, 1, negative), InvalidArgument) << "negative tag";
      Tensor odd_rows = Tensor::zeros({size + 1});
      Tensor out = Tensor::zeros({size + 1});
      EXPECT_THROW(pg.all_to_all_single(out, odd_rows), InvalidArgument) << "all_to_all rows not divisible by size()";
      ScatterOptions from_one;
      from_one.root = 1;
      std::vector<Tensor> inputs_off_root(static_cast<size_t>(size), Tensor::zeros({4}));
      EXPECT_THROW(pg.scatter(f, inputs_off_root, from_one), InvalidArgument) << "scatter inputs on a non-root rank";
    }
    EXPECT_EQ(pg.next_seq(), seq_before) << "a refused call used up a sequence number";
  }
  // Only rank 0 made the bad calls. Had any of them sent something, this collective would
  // not match across ranks (or would carry the wrong data).
  check_all_reduce(pg, DType::kFloat32, ReduceOp::SUM, 5);
  // An op timeout of 0 ms and a stray reduce op kind are refused on every rank alike (not
  // "never time out" on one backend and "abort the group" on another); the group goes on.
  const uint64_t seq_all = pg.next_seq();
  refuse_zero_timeouts_and_bad_reduce_ops(pg);
  EXPECT_EQ(pg.next_seq(), seq_all) << "a refused call used up a sequence number";
  check_all_reduce(pg, DType::kFloat32, ReduceOp::SUM, 5);
  if (size > 1) check_send_recv(pg, DType::kFloat32, 3);
}

}  // namespace conformance
}  // namespace distcomm
