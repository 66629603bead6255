// What the core guarantees for every backend's ops, over the misbehaving test plugin
// (tests/api/plugins/misbehaving_backend.cc): a null Work, a Work never ended, a throw
// before any Work, a Work ended with PeerFailure.
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/store/hash_store.h"
#include "tests/api/plugin_test_env.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;

ProcessGroupPtr group() {
  use_test_plugins();
  ProcessGroupOptions o;
  o.backend = "misbehaving";
  o.store = std::make_shared<HashStore>();
  return ProcessGroup::create(o);
}

void expect_context(const std::string& m, const std::string& op_and_seq) {
  EXPECT_NE(m.find("rank 0/1 group 'world' " + op_and_seq), std::string::npos) << m;
  EXPECT_NE(m.find("backend 'misbehaving'"), std::string::npos) << m;
}

template <typename E>
std::string thrown_by(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "other exception: " << e.what();
  }
  ADD_FAILURE() << "nothing thrown";
  return "";
}

TEST(BackendMisbehaviour, ANullWorkIsRefusedNamingTheOp) {
  auto pg = group();
  Tensor t = Tensor::of({1.f});
  const std::string m = thrown_by<Error>([&] { pg->all_reduce(t); });
  expect_context(m, "all_reduce #0");
  EXPECT_NE(m.find("null Work"), std::string::npos) << m;
  Tensor ok = Tensor::of({0.f});
  pg->all_reduce(ok)->wait();  // the group goes on
}

TEST(BackendMisbehaviour, SynchronousThrowsCarryTheOpsContextAndKeepTheirKind) {
  auto pg = group();
  Tensor a = Tensor::of({3.f});
  std::string m = thrown_by<Error>([&] { pg->all_reduce(a); });
  expect_context(m, "all_reduce #0");
  EXPECT_NE(m.find("all_reduce exploded"), std::string::npos) << m;
  Tensor b = Tensor::of({4.f});
  m = thrown_by<Error>([&] { pg->all_reduce(b); });
  expect_context(m, "all_reduce #1");
  EXPECT_NE(m.find("non-std::exception"), std::string::npos) << m;
  Tensor c = Tensor::of({5.f});
  m = thrown_by<InvalidArgument>([&] { pg->all_reduce(c); });
  expect_context(m, "all_reduce #2");
  // The core's own checks already say where: said once.
  AllReduceOptions o;
  o.timeout = 0ms;
  m = thrown_by<InvalidArgument>([&] { pg->all_reduce(c, o); });
  EXPECT_EQ(m.find("rank 0/1"), m.rfind("rank 0/1")) << m;
}

TEST(BackendMisbehaviour, AWorkNeverEndedEndsInTimeoutAfterItsDeadlineAndTheGrace) {
  auto pg = group();
  AllReduceOptions o;
  o.timeout = 300ms;
  const auto grace = core_timeout_grace(o.timeout);
  Tensor t1 = Tensor::of({2.f}), t2 = Tensor::of({2.f}), t3 = Tensor::of({2.f});
  const auto start = std::chrono::steady_clock::now();
  WorkPtr waited = pg->all_reduce(t1, o);
  WorkPtr waited_with_timeout = pg->all_reduce(t2, o);
  WorkPtr polled = pg->all_reduce(t3, o);
  EXPECT_FALSE(polled->is_completed());
  // A wait(timeout) shorter than the deadline is the caller's own Timeout; the op goes on.
  EXPECT_THROW(waited_with_timeout->wait(50ms), Timeout);
  EXPECT_FALSE(waited_with_timeout->is_completed());
  const std::string m = thrown_by<Timeout>([&] { waited->wait(); });
  const auto took = std::chrono::steady_clock::now() - start;
  expect_context(m, "all_reduce #0");
  EXPECT_NE(m.find("did not end the op within its timeout (300 ms)"), std::string::npos) << m;
  EXPECT_NE(m.find("the core ended it"), std::string::npos) << m;
  EXPECT_GE(took, o.timeout + grace - 50ms);
  EXPECT_LT(took, o.timeout + grace + 3s);
  const std::string m2 = thrown_by<Timeout>([&] { waited_with_timeout->wait(60s); });
  expect_context(m2, "all_reduce #1");
  EXPECT_NE(m2.find("the core ended it"), std::string::npos) << m2;
  // A poll does not end it (polls run under backends' locks: work.cc); a wait does.
  EXPECT_FALSE(polled->is_completed());
  const std::string m3 = thrown_by<Timeout>([&] { polled->wait(); });
  EXPECT_NE(m3.find("the core ended it"), std::string::npos) << m3;
  EXPECT_TRUE(polled->is_completed());
  EXPECT_FALSE(polled->is_success());
  // The group failed: the next op ends at once, quoting the first failure.
  Tensor next = Tensor::of({0.f});
  const std::string later = thrown_by<Timeout>([&] { pg->all_reduce(next)->wait(1s); });
  EXPECT_NE(later.find("the group is unusable since an earlier failure"), std::string::npos) << later;
  EXPECT_NE(later.find("all_reduce #0"), std::string::npos) << later;
}

TEST(BackendMisbehaviour, AfterAPeerFailureLaterOpsFailAtOnce) {
  auto pg = group();
  Tensor t = Tensor::of({6.f});
  EXPECT_THROW(pg->all_reduce(t)->wait(), PeerFailure);
  Tensor b = Tensor::of({0.f});
  WorkPtr bcast = pg->broadcast(b);
  ASSERT_TRUE(bcast->is_completed());
  const std::string m = thrown_by<PeerFailure>([&] { bcast->wait(); });
  EXPECT_NE(m.find("rank 0/1 group 'world' broadcast #1"), std::string::npos) << m;
  EXPECT_NE(m.find("the group is unusable since an earlier failure; create a new group. First failure: rank 0/1 "
                   "group 'world' all_reduce #0"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("misbehaving: link down"), std::string::npos) << m;
  EXPECT_EQ(m.find("unusable", m.find("unusable") + 1), std::string::npos) << "quoted twice: " << m;
}

}  // namespace
}  // namespace distcomm
