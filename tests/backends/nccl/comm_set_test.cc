// batch_isend_irecv's communicators (comm_set.h): the pair communicators send and recv
// use, set up in an order no ring of batches can deadlock on, and watched and aborted as
// one. CPU stand-ins: a pair's setup is a two-rank rendezvous (as NCCL's blocking setup
// waits for the peer), a communicator is a FakeComm with an issue lock.
#include "backends/nccl/comm_set.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <thread>

#include "api/errors.h"
#include "tests/backends/nccl/fake_device.h"

namespace distcomm {
namespace nccl {
namespace testing {
namespace {

using namespace std::chrono_literals;

TEST(CommSetTest, PeersAreSetUpInAscendingOrderOnce) {
  EXPECT_EQ(pair_setup_order({3, 1, 3, 0}), (std::vector<int>{0, 1, 3}));
}

// Each pair's setup returns when both of its ranks have arrived, or fails after `limit`.
class PairSetups {
 public:
  bool set_up(int a, int b, std::chrono::milliseconds limit) {
    const auto key = std::make_pair(std::min(a, b), std::max(a, b));
    std::unique_lock<std::mutex> lock(mu_);
    ++arrived_[key];
    cv_.notify_all();
    return cv_.wait_for(lock, limit, [&] { return arrived_[key] >= 2; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, int> arrived_;
};

// Every rank of a ring of n runs a batch {send to the next, recv from the previous},
// setting up its pairs in `order(rank, peers)`, each setup waiting at most `limit`;
// returns how many ranks got through.
template <typename Order>
int ranks_through_a_ring(int n, Order order, std::chrono::milliseconds limit) {
  PairSetups setups;
  std::atomic<int> through{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      bool ok = true;
      for (int peer : order(r, std::vector<int>{(r + 1) % n, (r + n - 1) % n})) {
        ok = ok && setups.set_up(r, peer, limit);
      }
      if (ok) ++through;
    });
  }
  for (auto& t : ranks) t.join();
  return through;
}

TEST(CommSetTest, ARingOfBatchesSetsItsPairsUpWithoutWaitingInACircle) {
  for (int n : {3, 4, 5}) {
    EXPECT_EQ(ranks_through_a_ring(n, [](int, std::vector<int> peers) { return pair_setup_order(peers); }, 30000ms),
              n)
        << n << " ranks";
  }
  // The batch's own order waits in a circle: each rank waits for the next, which waits for
  // its next, until the limit. What the order above avoids.
  EXPECT_EQ(ranks_through_a_ring(4, [](int, std::vector<int> peers) { return peers; }, 300ms), 0);
}

class LockableComm : public FakeComm {
 public:
  using FakeComm::FakeComm;
  std::unique_lock<std::recursive_mutex> lock_issue() { return std::unique_lock<std::recursive_mutex>(mu_); }
  bool busy() {
    std::atomic<bool> locked{false};
    std::thread([&] { locked = !mu_.try_lock() ? true : (mu_.unlock(), false); }).join();
    return locked;
  }

 private:
  std::recursive_mutex mu_;
};

TEST(CommSetTest, IsWatchedAndAbortedAsOne) {
  auto a = std::make_shared<LockableComm>("NCCL communicator of ranks 0 and 1 of group 'world' on cuda:0");
  auto b = std::make_shared<LockableComm>("NCCL communicator of ranks 1 and 2 of group 'world' on cuda:0");
  CommSet<LockableComm> set({a, b}, 1000ms);
  EXPECT_EQ(set.label(), a->label() + " and " + b->label());
  EXPECT_EQ(set.async_error(), nullptr);
  b->set_error("ncclCommGetAsyncError: remote process exited");
  EXPECT_NE(message_of<PeerFailure>(set.async_error()).find("remote process exited"), std::string::npos);
  {
    auto locks = set.lock_issue();
    EXPECT_TRUE(a->busy());
    EXPECT_TRUE(b->busy());
  }
  EXPECT_FALSE(a->busy());
  EXPECT_EQ(set.abort_reason(), "");
  set.abort("rank 2 died");
  EXPECT_EQ(a->aborts, 1);
  EXPECT_EQ(b->aborts, 1);
  EXPECT_EQ(set.abort_reason(), "rank 2 died");
}

// An op of the set whose end marker passed after one member was aborted fails.
TEST(CommSetTest, AnOpOfTheSetIsNoSuccessOnceAMemberWasAborted) {
  auto a = std::make_shared<LockableComm>("pair 0-1");
  auto b = std::make_shared<LockableComm>("pair 1-2");
  auto set = std::make_shared<CommSet<LockableComm>>(std::vector<std::shared_ptr<LockableComm>>{a, b}, 1000ms);
  auto w = std::make_shared<FakeWork>("batch_isend_irecv #0", set);
  b->abort("the watchdog aborted it");
  w->marker = TrackedWork::Marker::kPassed;
  EXPECT_FALSE(w->is_completed()) << "left to the watchdog, which fails it";
  std::exception_ptr error;
  EXPECT_EQ(w->poll(&error), TrackedOp::Poll::kFailed);
  EXPECT_NE(message_of<PeerFailure>(error).find("the watchdog aborted it"), std::string::npos);
}

}  // namespace
}  // namespace testing
}  // namespace nccl
}  // namespace distcomm
