// Conformance checks of point-to-point ops and barrier (conformance.h).
#include <chrono>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tests/backends/conformance/conformance.h"
#include "tests/backends/conformance/conformance_values.h"

namespace distcomm {
namespace conformance {

using internal::data_value;
using internal::expect_elements;
using internal::host_tensor;

namespace {

double message_value(DType dtype, int src, int tag, int64_t i) { return data_value(dtype, src * 1009 + tag * 31 + i * 3 + 1); }

P2POptions with_tag(int tag) {
  P2POptions o;
  o.tag = tag;
  return o;
}

}  // namespace

void check_send_recv(ProcessGroup& pg, DType dtype, int64_t count, const Placement& p) {
  const std::string what = std::string("send/recv ") + dtype_name(dtype) + " count=" + std::to_string(count);
  const int me = pg.rank();
  const int size = pg.size();
  const int next = (me + 1) % size;
  const int prev = (me + size - 1) % size;
  auto junk = [&](int64_t i) { return data_value(dtype, i + 77); };
  Tensor got1 = p.to_device(host_tensor(dtype, {count}, junk));
  Tensor got2 = p.to_device(host_tensor(dtype, {count}, junk));
  // Receives are posted tag 2 first, sends go tag 1 first: only matching by tag pairs them up.
  WorkPtr r2 = pg.recv(got2, prev, with_tag(2));
  WorkPtr r1 = pg.recv(got1, prev, with_tag(1));
  Tensor msg1 = p.to_device(host_tensor(dtype, {count}, [&](int64_t i) { return message_value(dtype, me, 1, i); }));
  Tensor msg2 = p.to_device(host_tensor(dtype, {count}, [&](int64_t i) { return message_value(dtype, me, 2, i); }));
  WorkPtr s1 = pg.send(msg1, next, with_tag(1));
  WorkPtr s2 = pg.send(msg2, next, with_tag(2));
  for (auto& w : {s1, s2, r1, r2}) w->wait();
  // A recv from a named rank says its source too (Work::source_rank), as recv_any_source's
  // does; a send has none.
  EXPECT_EQ(r1->source_rank(), prev) << what << " tag 1: source_rank() of recv(src=" << prev << ")";
  EXPECT_EQ(r2->source_rank(), prev) << what << " tag 2: source_rank() of recv(src=" << prev << ")";
  EXPECT_EQ(s1->source_rank(), -1) << what << ": source_rank() of a send";
  expect_elements(p.to_host(got1), [&](int64_t i) { return message_value(dtype, prev, 1, i); }, what + " tag 1");
  expect_elements(p.to_host(got2), [&](int64_t i) { return message_value(dtype, prev, 2, i); }, what + " tag 2");
}

void check_recv_any_source(ProcessGroup& pg, int64_t count, const Placement& p) {
  const std::string what = "recv_any_source count=" + std::to_string(count);
  const DType dtype = DType::kInt32;
  // A tag of its own per count: an any-source receive still pending from an earlier call
  // would otherwise be matched with this call's (longer) messages, as in MPI.
  const int tag = 1000 + static_cast<int>(count % 100000);
  if (pg.rank() != 0) {
    Tensor msg = p.to_device(host_tensor(dtype, {count}, [&](int64_t i) { return message_value(dtype, pg.rank(), tag, i); }));
    pg.send(msg, 0, with_tag(tag))->wait();
    return;
  }
  std::vector<Tensor> got;
  std::vector<WorkPtr> works;
  for (int k = 1; k < pg.size(); ++k) {
    got.push_back(p.to_device(host_tensor(dtype, {count}, [](int64_t) { return -1.0; })));
    works.push_back(pg.recv_any_source(got.back(), with_tag(tag)));
  }
  std::set<int> sources;
  for (size_t k = 0; k < works.size(); ++k) {
    works[k]->wait();
    const int src = works[k]->source_rank();
    sources.insert(src);
    ASSERT_GE(src, 1) << what << ": source_rank() of receive " << k;
    ASSERT_LT(src, pg.size()) << what << ": source_rank() of receive " << k;
    expect_elements(p.to_host(got[k]), [&](int64_t i) { return message_value(dtype, src, tag, i); },
                    what + ": data of the message source_rank() names (" + std::to_string(src) + ")");
  }
  EXPECT_EQ(static_cast<int>(sources.size()), pg.size() - 1) << what << ": every sender should be received once";
}

// Rank 0 enters the second barrier late; no rank may leave it before rank 0 entered it.
// The ranks share a host, so their steady clocks (CLOCK_MONOTONIC) are one clock: rank 0
// sends the time it entered, and each rank compares it with the time it left.
void check_barrier(ProcessGroup& pg, const Placement& p) {
  using Clock = std::chrono::steady_clock;
  pg.barrier()->wait();
  if (pg.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // makes a broken barrier visible
  const int64_t entered = Clock::now().time_since_epoch().count();
  pg.barrier()->wait();
  const int64_t left = Clock::now().time_since_epoch().count();
  Tensor rank0_entered = p.to_device(Tensor::of<int64_t>({entered}));
  pg.broadcast(rank0_entered)->wait();
  EXPECT_GE(left, p.to_host(rank0_entered).data_as<int64_t>()[0])
      << "barrier returned on rank " << pg.rank() << " before rank 0 had entered it";
}

}  // namespace conformance
}  // namespace distcomm
