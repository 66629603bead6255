// The mpi backend through the path users take: init_process_group("mpi") under mpirun,
// the plugin loaded from the runfiles, every op checked against a plain reference.
// mpirun_test.sh runs it with 1 to 4 ranks; every rank runs every test, in the same order.
// Checks never return early: a rank that left a test would leave the others waiting.
//
// --progress=thread runs it with every MPI call on the plugin's MPI thread (the path of an
// MPI library without MPI_THREAD_MULTIPLE); by default waiting threads drive MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "api/errors.h"
#include "api/init.h"
#include "api/process_group.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::string g_progress = "waiters";

class MpiWorld : public ::testing::Environment {
 public:
  void SetUp() override {
    InitOptions o;
    o.backend = "mpi";
    o.timeout = std::chrono::seconds(60);
    o.backend_config["progress"] = g_progress;
    init_process_group(o);
  }
  void TearDown() override { destroy_process_group(); }
};

ProcessGroup& world() { return default_group(); }
int rank() { return world().rank(); }
int size() { return world().size(); }

// Reports the first element that differs (tolerance 0: exact).
void expect_values(const Tensor& t, const std::function<double(int64_t)>& expected, const std::string& what,
                   double tolerance = 0) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double want = expected(i);
    if (std::fabs(t.item(i) - want) > tolerance * std::max(1.0, std::fabs(want))) {
      ADD_FAILURE() << what << ": element " << i << " is " << t.item(i) << ", expected " << want;
      return;
    }
  }
}

Tensor filled(int64_t count, DType dtype, const std::function<double(int64_t)>& value) {
  Tensor t = Tensor::empty({count}, dtype);
  for (int64_t i = 0; i < count; ++i) t.set_item(i, value(i));
  return t;
}

std::vector<DType> all_dtypes() {
  return {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
          DType::kUInt8,   DType::kInt32,   DType::kInt64,   DType::kBool};
}

// Inputs whose reductions are exact in every dtype, whatever order MPI combines them in.
double input_value(DType dtype, ReduceOp op, int r, int64_t i) {
  if (dtype == DType::kBool) return (r + i) % 3 == 0;
  if (op.kind == ReduceOp::PRODUCT) return 1 + (r + i) % 2;
  const double v = (r * 7 + i) % 11;
  return dtype == DType::kUInt8 ? v : v - 3;
}

// The reference: every rank's input reduced by the op's definition.
double expected_value(DType dtype, ReduceOp op, int64_t i) {
  std::vector<int64_t> inputs;
  for (int r = 0; r < size(); ++r) inputs.push_back(static_cast<int64_t>(input_value(dtype, op, r, i)));
  return reference_reduction(op, dtype, inputs);
}

TEST(MpiBackend, AllReduceEveryDTypeOpAndCount) {
  const std::vector<ReduceOp> ops = {ReduceOp::SUM, ReduceOp::AVG,  ReduceOp::PRODUCT,
                                     ReduceOp::MIN, ReduceOp::MAX,  ReduceOp::BAND,
                                     ReduceOp::BOR, ReduceOp::BXOR, ReduceOp::premul_sum(0.5)};
  for (DType dtype : all_dtypes()) {
    for (ReduceOp op : ops) {
      if (!reduce_supported(op, dtype)) continue;
      for (int64_t count : {0, 1, 7, 1000}) {
        Tensor t = filled(count, dtype, [&](int64_t i) { return input_value(dtype, op, rank(), i); });
        world().all_reduce(t, {op})->wait();
        // AVG of 16-bit floats rounds twice (sum, then divide); everything else is exact.
        const double tolerance = op.kind == ReduceOp::AVG && is_floating(dtype) ? 1e-2 : 0;
        expect_values(t, [&](int64_t i) { return expected_value(dtype, op, i); },
                      std::string("all_reduce ") + op.name() + " " + dtype_name(dtype) + "[" +
                          std::to_string(count) + "]",
                      tolerance);
      }
    }
  }
}

TEST(MpiBackend, BroadcastAndReduceFromEveryRoot) {
  for (int root = 0; root < size(); ++root) {
    for (DType dtype : all_dtypes()) {
      Tensor t = filled(7, dtype, [&](int64_t i) { return dtype == DType::kBool ? (rank() + i) % 2 : rank() * 10 + i; });
      world().broadcast(t, {root})->wait();
      expect_values(t, [&](int64_t i) { return dtype == DType::kBool ? (root + i) % 2 : root * 10 + i; },
                    std::string("broadcast ") + dtype_name(dtype) + " from " + std::to_string(root));
    }
    Tensor t = filled(9, DType::kInt64, [&](int64_t i) { return rank() + i; });
    world().reduce(t, {root, ReduceOp::SUM})->wait();
    const int n = size();
    if (rank() == root) {
      expect_values(t, [&](int64_t i) { return n * (n - 1) / 2 + n * i; }, "reduce on the root");
    } else {
      expect_values(t, [&](int64_t i) { return rank() + i; }, "reduce leaves other ranks' tensors alone");
    }
  }
}

TEST(MpiBackend, AllGatherOutOfPlaceInPlaceAndList) {
  const int64_t k = 5;
  auto gathered = [&](int64_t j) { return (j / k) * 10 + j % k; };
  Tensor input = filled(k, DType::kFloat32, [&](int64_t i) { return rank() * 10 + i; });
  Tensor out = Tensor::empty({k * size()});
  world().all_gather_into_tensor(out, input)->wait();
  expect_values(out, gathered, "all_gather out of place");

  // The input already sits in this rank's block of the output: MPI_IN_PLACE.
  Tensor in_place = Tensor::zeros({k * size()});
  Tensor own_block = in_place.flat_slice(rank() * k, k);
  own_block.copy_from(input);
  world().all_gather_into_tensor(in_place, own_block)->wait();
  expect_values(in_place, gathered, "all_gather in place");

  std::vector<Tensor> outputs;
  for (int r = 0; r < size(); ++r) outputs.push_back(Tensor::empty({k}));
  world().all_gather(outputs, input)->wait();
  for (int r = 0; r < size(); ++r) {
    expect_values(outputs[r], [&](int64_t i) { return r * 10 + i; }, "all_gather list " + std::to_string(r));
  }
}

TEST(MpiBackend, GatherAndScatterFromEveryRoot) {
  const int64_t k = 3;
  for (int root = 0; root < size(); ++root) {
    std::vector<Tensor> outputs;
    if (rank() == root) {
      for (int r = 0; r < size(); ++r) outputs.push_back(Tensor::empty({k}, DType::kInt32));
    }
    world().gather(outputs, filled(k, DType::kInt32, [&](int64_t i) { return rank() * 10 + i; }), {root})->wait();
    for (int r = 0; r < static_cast<int>(outputs.size()); ++r) {
      expect_values(outputs[r], [&](int64_t i) { return r * 10 + i; }, "gather block " + std::to_string(r));
    }

    std::vector<Tensor> inputs;
    if (rank() == root) {
      for (int r = 0; r < size(); ++r) {
        inputs.push_back(filled(k, DType::kFloat16, [&](int64_t i) { return r * 100 + i; }));
      }
    }
    Tensor output = Tensor::zeros({k}, DType::kFloat16);
    world().scatter(output, inputs, {root})->wait();
    expect_values(output, [&](int64_t i) { return rank() * 100 + i; }, "scatter from " + std::to_string(root));
  }
}

// Integer reductions wrap (two's complement), as torch, gloo and shm do: Open MPI's op/avx
// component added int8/uint8 with saturating vector adds (200 + 200 in uint8 gave 255 from
// 16 elements up), so the backend brings its own SUM for them (mpi_types.cc). Every op on
// every integer dtype, with values that overflow, at sizes around the vector widths.
template <class T>
T wrapping_value(int r, int64_t i) {
  return static_cast<T>(0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i * 131 + r * 7919 + 1) >> 3);
}

template <class T>
T wrapping_reference(ReduceOp op, int64_t i) {
  using U = std::make_unsigned_t<T>;
  T acc = wrapping_value<T>(0, i);
  for (int r = 1; r < size(); ++r) {
    const T v = wrapping_value<T>(r, i);
    switch (op.kind) {
      case ReduceOp::SUM: acc = static_cast<T>(static_cast<U>(acc) + static_cast<U>(v)); break;
      case ReduceOp::PRODUCT: acc = static_cast<T>(static_cast<U>(static_cast<U>(acc) * static_cast<U>(v))); break;
      case ReduceOp::MIN: acc = std::min(acc, v); break;
      case ReduceOp::MAX: acc = std::max(acc, v); break;
      case ReduceOp::BAND: acc = static_cast<T>(acc & v); break;
      case ReduceOp::BOR: acc = static_cast<T>(acc | v); break;
      case ReduceOp::BXOR: acc = static_cast<T>(acc ^ v); break;
      default: break;
    }
  }
  return acc;
}

template <class T>
Tensor wrapping_input(int64_t count, DType dtype, int64_t first = 0) {
  Tensor t = Tensor::empty({count}, dtype);
  T* p = static_cast<T*>(t.data());
  for (int64_t i = 0; i < count; ++i) p[i] = wrapping_value<T>(rank(), first + i);
  return t;
}

template <class T>
void expect_wrapped(const Tensor& t, ReduceOp op, const std::string& what, int64_t first = 0) {
  const T* p = static_cast<const T*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const T want = wrapping_reference<T>(op, first + i);
    if (p[i] != want) {
      ADD_FAILURE() << what << ": element " << i << " is " << static_cast<int64_t>(p[i]) << ", expected "
                    << static_cast<int64_t>(want);
      return;
    }
  }
}

template <class T>
void check_integer_reductions(DType dtype) {
  const std::vector<ReduceOp> ops = {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
                                     ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR};
  for (int64_t count : {1, 15, 16, 31, 32, 64, 100, 4099}) {
    for (ReduceOp op : ops) {
      const std::string what = std::string(op.name()) + " " + dtype_name(dtype) + "[" + std::to_string(count) + "]";
      Tensor t = wrapping_input<T>(count, dtype);
      world().all_reduce(t, {op})->wait();
      expect_wrapped<T>(t, op, "all_reduce " + what);
      if (op.kind != ReduceOp::SUM && op.kind != ReduceOp::PRODUCT) continue;
      const int root = static_cast<int>(count % size());
      Tensor r = wrapping_input<T>(count, dtype);
      world().reduce(r, {root, op})->wait();
      if (rank() == root) expect_wrapped<T>(r, op, "reduce " + what);
      Tensor in = wrapping_input<T>(count * size(), dtype);
      Tensor out = Tensor::empty({count}, dtype);
      world().reduce_scatter_tensor(out, in, {op})->wait();
      expect_wrapped<T>(out, op, "reduce_scatter " + what, count * rank());
    }
  }
}

TEST(MpiBackend, IntegerReductionsWrapAroundLikeTorch) {
  // The user's case: every rank 200 in uint8, 100 in int8 (2 ranks: 144 and -56).
  for (int64_t count : {31, 32, 64, 4099}) {
    Tensor u = Tensor::empty({count}, DType::kUInt8);
    u.fill(200);
    Tensor s = Tensor::empty({count}, DType::kInt8);
    s.fill(100);
    world().all_reduce(u)->wait();
    world().all_reduce(s)->wait();
    expect_values(u, [&](int64_t) { return static_cast<uint8_t>(200 * size()); },
                  "all_reduce uint8 200s [" + std::to_string(count) + "]");
    expect_values(s, [&](int64_t) { return static_cast<int8_t>(100 * size()); },
                  "all_reduce int8 100s [" + std::to_string(count) + "]");
  }
  check_integer_reductions<int8_t>(DType::kInt8);
  check_integer_reductions<uint8_t>(DType::kUInt8);
  check_integer_reductions<int32_t>(DType::kInt32);
  check_integer_reductions<int64_t>(DType::kInt64);
}

TEST(MpiBackend, ReduceScatterSumMaxAndAvg) {
  const int64_t k = 4;
  const int n = size();
  Tensor input = filled(k * n, DType::kFloat64, [&](int64_t j) { return rank() + j; });
  Tensor out = Tensor::empty({k}, DType::kFloat64);
  world().reduce_scatter_tensor(out, input, {ReduceOp::SUM})->wait();
  expect_values(out, [&](int64_t i) { return n * (n - 1) / 2 + n * (rank() * k + i); }, "reduce_scatter sum");
  world().reduce_scatter_tensor(out, input, {ReduceOp::MAX})->wait();
  expect_values(out, [&](int64_t i) { return (n - 1) + rank() * k + i; }, "reduce_scatter max");
  world().reduce_scatter_tensor(out, input, {ReduceOp::AVG})->wait();
  expect_values(out, [&](int64_t i) { return (n - 1) / 2.0 + rank() * k + i; }, "reduce_scatter avg");
}

TEST(MpiBackend, AllToAllEqualAndUnevenSplits) {
  const int n = size();
  Tensor in = filled(2 * n, DType::kInt64, [&](int64_t j) { return 1000 * rank() + j; });
  Tensor out = Tensor::empty({2 * n}, DType::kInt64);
  world().all_to_all_single(out, in)->wait();
  expect_values(out, [&](int64_t j) { return 1000 * (j / 2) + 2 * rank() + j % 2; }, "all_to_all equal");

  // Rank s sends (s + d) % 3 + 1 elements to rank d, each saying who sent it to whom.
  auto count = [](int s, int d) { return static_cast<int64_t>((s + d) % 3 + 1); };
  std::vector<int64_t> in_splits, out_splits;
  std::vector<double> send, want;
  for (int d = 0; d < n; ++d) {
    in_splits.push_back(count(rank(), d));
    out_splits.push_back(count(d, rank()));
    for (int64_t i = 0; i < count(rank(), d); ++i) send.push_back(1000 * rank() + 10 * d + i);
    for (int64_t i = 0; i < count(d, rank()); ++i) want.push_back(1000 * d + 10 * rank() + i);
  }
  Tensor uneven_in = filled(static_cast<int64_t>(send.size()), DType::kInt32, [&](int64_t j) { return send[j]; });
  Tensor uneven_out = Tensor::empty({static_cast<int64_t>(want.size())}, DType::kInt32);
  world().all_to_all_single(uneven_out, uneven_in, out_splits, in_splits)->wait();
  expect_values(uneven_out, [&](int64_t j) { return want[j]; }, "all_to_all uneven");
}

TEST(MpiBackend, ManyOpsInFlightFinishInOrder) {
  std::vector<Tensor> tensors;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 50; ++k) {
    tensors.push_back(filled(100, DType::kFloat32, [&](int64_t) { return k + rank(); }));
    works.push_back(world().all_reduce(tensors.back()));
  }
  // The same tensor reduced twice in a row must see the first result.
  Tensor twice = filled(10, DType::kFloat32, [](int64_t) { return 1; });
  world().all_reduce(twice);
  WorkPtr second = world().all_reduce(twice);
  works.push_back(world().barrier());
  for (auto& w : works) w->wait();
  second->wait();
  const int n = size();
  for (int k = 0; k < 50; ++k) {
    expect_values(tensors[k], [&](int64_t) { return n * k + n * (n - 1) / 2; }, "in flight #" + std::to_string(k));
  }
  expect_values(twice, [&](int64_t) { return n * n; }, "two all_reduces of one tensor");
}

// Rank 0 issues all_reduces and never waits on them: the plugin's own thread must move
// them, or they would never complete (rank 0 only watches is_completed(), which does not
// progress anything). A small op (taken over after a quiet nap) and a large one (its
// submit wakes the thread at once).
TEST(MpiBackend, OpsNobodyWaitsForStillProgress) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  for (int64_t count : {int64_t{1000}, int64_t{1} << 18}) {
    Tensor t = filled(count, DType::kFloat32, [&](int64_t i) { return rank() + i % 5; });
    world().barrier()->wait();
    WorkPtr w = world().all_reduce(t);
    if (rank() == 0) {
      const auto give_up = Clock::now() + std::chrono::seconds(30);
      while (!w->is_completed() && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(5));
      ASSERT_TRUE(w->is_completed()) << count << " elements: not finished after 30 s nobody waited";
    }
    w->wait();
    const int n = size();
    expect_values(t, [&](int64_t i) { return n * (n - 1) / 2 + n * (i % 5); }, "unattended all_reduce");
  }
}

TEST(MpiBackend, SendRecvRingInEitherOrderAndLargeBothWays) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
  Tensor out = filled(6, DType::kBFloat16, [&](int64_t i) { return rank() * 10 + i; });
  Tensor in = Tensor::zeros({6}, DType::kBFloat16);
  P2POptions tag7;
  tag7.tag = 7;
  // Odd ranks receive first: a send must not wait for the recv issued after it.
  WorkPtr a, b;
  if (rank() % 2) {
    a = world().recv(in, prev, tag7);
    b = world().send(out, next, tag7);
  } else {
    a = world().send(out, next, tag7);
    b = world().recv(in, prev, tag7);
  }
  a->wait();
  b->wait();
  expect_values(in, [&](int64_t i) { return prev * 10 + i; }, "ring recv");

  // 4 MiB each way at once: past MPI's eager limit, so each send needs its recv started.
  const int64_t big = 1 << 20;
  Tensor big_out = filled(big, DType::kFloat32, [&](int64_t i) { return rank() + i % 7; });
  Tensor big_in = Tensor::zeros({big});
  WorkPtr s = world().send(big_out, next);
  WorkPtr r = world().recv(big_in, prev);
  s->wait();
  r->wait();
  expect_values(big_in, [&](int64_t i) { return prev + i % 7; }, "large ring recv");
}

TEST(MpiBackend, RecvAnySourceTellsTheSender) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  P2POptions tag;
  tag.tag = 11;
  if (rank() != 0) {
    world().send(Tensor::of<int32_t>({rank()}), 0, tag)->wait();
  } else {
    std::set<int> sources;
    for (int k = 1; k < size(); ++k) {
      Tensor t = Tensor::zeros({1}, DType::kInt32);
      WorkPtr w = world().recv_any_source(t, tag);
      w->wait();
      EXPECT_EQ(w->source_rank(), static_cast<int>(t.item(0)));
      sources.insert(w->source_rank());
    }
    EXPECT_EQ(static_cast<int>(sources.size()), size() - 1);
  }
  world().barrier()->wait();
}

// A recv probes its source with any tag (the tag's low bits carry the dtype:
// backends/mpi/p2p_tag.h), so messages of other tags that arrive first must wait for their
// own recvs, each tag's in the order sent.
TEST(MpiBackend, MessagesOfOtherTagsWaitForTheirRecvsInOrder) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  P2POptions tag5, tag7;
  tag5.tag = 5;
  tag7.tag = 7;
  if (rank() == 0) {
    // Small enough to go eagerly: each send completes before rank 1 receives anything.
    for (int k = 0; k < 4; ++k) world().send(Tensor::of<int64_t>({k + 1}), 1, k % 2 ? tag7 : tag5)->wait();
  }
  world().barrier()->wait();  // all four are at rank 1 before its first recv
  if (rank() == 1) {
    auto next = [&](const P2POptions& tag, bool any_source) {
      Tensor t = Tensor::zeros({1}, DType::kInt64);
      WorkPtr w = any_source ? world().recv_any_source(t, tag) : world().recv(t, 0, tag);
      w->wait();
      // recv(src) names its source as recv_any_source does (gloo and shm did; mpi said -1).
      EXPECT_EQ(w->source_rank(), 0) << (any_source ? "recv_any_source" : "recv(src=0)") << " tag " << tag.tag;
      return t.item(0);
    };
    EXPECT_EQ(next(tag7, false), 2) << "tag 7's first message, behind tag 5's";
    EXPECT_EQ(next(tag5, false), 1) << "tag 5's first message, kept while tag 7's recv looked";
    EXPECT_EQ(next(tag7, true), 4) << "tag 7's second message, from any rank";
    EXPECT_EQ(next(tag5, true), 3) << "tag 5's second message, from any rank";
  }
  world().barrier()->wait();
}

// The user's tags end at MPI_TAG_UB >> 4 (the low 4 bits carry the dtype): 134217727 with
// ob1 (mpirun_test.sh's --mca pml ob1; MPI_TAG_UB 2^31 - 1). A tag beyond is refused
// before anything is sent, naming the range; the last one works. (A negative tag is the
// ProcessGroup's to refuse.)
TEST(MpiBackend, TagsOutsideTheRangeAreRefused) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr int kMaxTag = 134217727;
  const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
  P2POptions beyond;
  beyond.tag = kMaxTag + 1;
  try {
    world().send(Tensor::zeros({1}), next, beyond);
    ADD_FAILURE() << "send with tag " << beyond.tag << " was accepted";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tag 134217728 is outside the range 0..134217727"), std::string::npos) << what;
    EXPECT_NE(what.find("MPI_TAG_UB is 2147483647"), std::string::npos) << what;
  }
  Tensor refused = Tensor::zeros({1});
  EXPECT_THROW(world().recv(refused, prev, beyond), InvalidArgument) << "recv with tag " << beyond.tag;
  P2POptions last;
  last.tag = kMaxTag;
  Tensor in = Tensor::zeros({1});
  WorkPtr r = world().recv(in, prev, last);
  world().send(Tensor::of<float>({rank() + 1.0f}), next, last)->wait();
  r->wait();
  EXPECT_EQ(in.item(0), prev + 1) << "the last tag delivers";
  world().barrier()->wait();
}

// With max_count_per_call = 4, elementwise ops run as several MPI calls.
TEST(MpiBackend, OpsAboveTheCountOfOneCallAreSplit) {
  ProcessGroupOptions o;  // no store: MPI finds the peers
  o.rank = rank();
  o.size = size();
  o.backend = "mpi";
  o.group_name = "split_calls";
  o.timeout = std::chrono::seconds(60);
  o.backend_config["max_count_per_call"] = "4";
  auto pg = ProcessGroup::create(o);
  const int n = size();
  Tensor t = filled(23, DType::kInt32, [&](int64_t i) { return rank() + i; });
  pg->all_reduce(t)->wait();
  expect_values(t, [&](int64_t i) { return n * (n - 1) / 2 + n * i; }, "split all_reduce");
  Tensor b = filled(23, DType::kFloat64, [&](int64_t i) { return rank() * 100 + i; });
  pg->broadcast(b, {n - 1})->wait();
  expect_values(b, [&](int64_t i) { return (n - 1) * 100 + i; }, "split broadcast");
  if (n >= 2) {
    const int next = (rank() + 1) % n, prev = (rank() + n - 1) % n;
    Tensor in = Tensor::zeros({23});
    WorkPtr s = pg->send(filled(23, DType::kFloat32, [&](int64_t i) { return rank() + i; }), next);
    WorkPtr r = pg->recv(in, prev);
    s->wait();
    r->wait();
    expect_values(in, [&](int64_t i) { return prev + i; }, "split send/recv");
    // From any rank too: the first slice's sender sends the rest (tests/backends/mpi/
    // refused_recv.cc has two senders at once).
    Tensor any = Tensor::zeros({23});
    s = pg->send(filled(23, DType::kFloat32, [&](int64_t i) { return 50 + rank() + i; }), next);
    r = pg->recv_any_source(any);
    s->wait();
    r->wait();
    EXPECT_EQ(r->source_rank(), prev);
    expect_values(any, [&](int64_t i) { return 50 + prev + i; }, "split recv_any_source");
  }
  pg->barrier()->wait();
}

TEST(MpiBackend, SubgroupsOfEvenRanks) {
  std::vector<int> evens;
  for (int r = 0; r < size(); r += 2) evens.push_back(r);
  auto group = world().new_group(evens);
  if (rank() % 2) {
    EXPECT_EQ(group, nullptr);
  } else {
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->rank(), rank() / 2);
    Tensor t = Tensor::of<int64_t>({rank()});
    group->all_reduce(t)->wait();
    int64_t sum = 0;
    for (int r : evens) sum += r;
    EXPECT_EQ(t.item(0), sum);
    Tensor b = Tensor::of<int64_t>({rank()});
    group->broadcast(b, {group->size() - 1})->wait();
    EXPECT_EQ(b.item(0), evens.back());
  }
  world().barrier()->wait();
}

// A group over the world's ranks in reverse order: its communicator must follow that
// order, not MPI_COMM_WORLD's.
TEST(MpiBackend, SubgroupInAnotherOrderThanTheWorld) {
  std::vector<int> reversed;
  for (int r = size() - 1; r >= 0; --r) reversed.push_back(r);
  ProcessGroupOptions o;  // no store: MPI finds the peers
  o.rank = size() - 1 - rank();
  o.size = size();
  o.backend = "mpi";
  o.group_name = "world/reversed";
  o.global_ranks = reversed;
  o.timeout = std::chrono::seconds(60);
  auto pg = ProcessGroup::create(o);
  Tensor t = Tensor::of<int32_t>({rank()});
  pg->broadcast(t, {0})->wait();  // group rank 0 is the last world rank
  EXPECT_EQ(t.item(0), size() - 1);
  world().barrier()->wait();
}

// MPI groups have no shared store: host messages (split, ordered_print, DDP's replica
// check) travel through the group's own collectives.
TEST(MpiBackend, HostMessagesTravelThroughCollectivesWithoutAStore) {
  EXPECT_EQ(world().store(), nullptr);
  const uint64_t seq_before = world().next_seq();
  const auto all = world().exchange().all_gather(std::string(static_cast<size_t>(rank()), 'm'));
  ASSERT_EQ(all.size(), static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) EXPECT_EQ(all[static_cast<size_t>(r)], std::string(static_cast<size_t>(r), 'm'));
  EXPECT_EQ(world().next_seq(), seq_before) << "the exchange's collectives take no op sequence number";
  // Same parity, ordered by descending rank (key -rank).
  auto half = world().split(rank() % 2, -rank());
  ASSERT_NE(half, nullptr);
  int above = 0;
  for (int r = rank() + 2; r < size(); r += 2) ++above;
  EXPECT_EQ(half->rank(), above);
  EXPECT_EQ(half->store(), nullptr);
  Tensor t = Tensor::of<int64_t>({rank()});
  half->all_reduce(t)->wait();
  int64_t sum = 0;
  for (int r = rank() % 2; r < size(); r += 2) sum += r;
  EXPECT_EQ(t.item(0), sum);
  const auto gathered = half->exchange().gather(std::to_string(rank()), 0);
  EXPECT_EQ(gathered.size(), half->rank() == 0 ? static_cast<size_t>(half->size()) : 0u);
  if (!gathered.empty()) {
    EXPECT_EQ(gathered.back(), std::to_string(rank() % 2));
  }
  world().barrier()->wait();
}

TEST(MpiBackend, TimeoutNamesOpAndSeqAndLaterOpsFailFast) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<int> everyone(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) everyone[r] = r;
  auto group = world().new_group(everyone);  // a group this test may break
  if (rank() == 0) {
    Tensor t = Tensor::zeros({4});
    AllReduceOptions o;
    o.timeout = milliseconds(300);
    const auto start = Clock::now();
    WorkPtr w = group->all_reduce(t, o);  // nobody else joins
    try {
      w->wait();
      ADD_FAILURE() << "an all_reduce no other rank joined finished";
    } catch (const Timeout& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("all_reduce #0"), std::string::npos) << what;
      EXPECT_NE(what.find("within 300 ms"), std::string::npos) << what;
    }
    const auto waited = Clock::now() - start;
    EXPECT_GE(waited, milliseconds(300));
    EXPECT_LT(waited, milliseconds(3000));

    const auto later = Clock::now();
    try {
      group->broadcast(t, {0})->wait();
      ADD_FAILURE() << "an op on a timed-out group succeeded";
    } catch (const Timeout& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("unusable since an earlier failure"), std::string::npos) << what;
      EXPECT_NE(what.find("all_reduce #0"), std::string::npos) << "names the first failure: " << what;
    }
    // Refused at its start, not after waiting: the group's own timeout is 60 s.
    EXPECT_LT(Clock::now() - later, milliseconds(5000));
  }
  world().barrier()->wait();
}

TEST(MpiBackend, RecvOfAShorterMessageFails) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto group = world().new_group({0, 1});
  P2POptions tag;
  tag.tag = 3;
  if (rank() == 1) group->send(Tensor::zeros({5}), 0, tag)->wait();
  if (rank() == 0) {
    Tensor t = Tensor::zeros({8});
    try {
      group->recv(t, 1, tag)->wait();
      ADD_FAILURE() << "a recv of 8 elements accepted a message of 5";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("tensor holds 8 float32 (32 bytes) but rank 1 sends 5 float32 (20 bytes)"),
                std::string::npos)
          << what;
    }
  }
  world().barrier()->wait();
}

TEST(MpiBackend, AbortFailsPendingOpsAtOnce) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto group = world().new_group({0, 1});
  if (rank() == 0) {
    Tensor t = Tensor::zeros({4});
    WorkPtr w = group->recv(t, 1);  // never sent
    const auto start = Clock::now();
    group->abort();
    EXPECT_THROW(w->wait(), Error);
    EXPECT_LT(Clock::now() - start, milliseconds(500));
    EXPECT_THROW(group->all_reduce(t), PeerFailure);
  }
  world().barrier()->wait();
}

TEST(MpiBackend, RankThatDisagreesWithMpiIsRefused) {
  ProcessGroupOptions o;  // no store: MPI finds the peers
  o.backend = "mpi";
  o.size = size() == 1 ? 2 : size();
  o.rank = (rank() + 1) % o.size;
  try {
    ProcessGroup::create(o);
    ADD_FAILURE() << "a group whose rank disagrees with MPI's was created";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("but MPI says rank " + std::to_string(rank())), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace distcomm

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--progress=", 0) == 0) distcomm::g_progress = arg.substr(11);
  }
  ::testing::AddGlobalTestEnvironment(new distcomm::MpiWorld);
  return RUN_ALL_TESTS();
}
