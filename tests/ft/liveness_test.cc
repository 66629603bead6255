// ft::Liveness judges a member by its heartbeat over this observer's own reads only: a gap
// of the timeout between two reads (its store calls blocked, as everyone's are while the
// store stalls) is no member's silence; reads once per half timeout (the monitor at its
// shortest interval) still judge. Found by an outside tester: after a stop of the job's store the first
// read took a member whose beats had been blocked just as long for gone.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "api/store/hash_store.h"
#include "ft/liveness.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {
namespace {

using namespace std::chrono_literals;
constexpr std::chrono::milliseconds kTimeout{400};

std::string judge_every_20ms_for(Liveness& l, const std::string& id, std::chrono::milliseconds span) {
  const auto end = std::chrono::steady_clock::now() + span;
  std::string why;
  while (why.empty() && std::chrono::steady_clock::now() < end) {
    why = l.gone(id);
    std::this_thread::sleep_for(20ms);
  }
  return why;
}

TEST(FtLiveness, AGapInTheObserversOwnReadsIsNoSilenceOfTheMember) {
  auto store = std::make_shared<HashStore>();
  Liveness observer(store, kTimeout);
  store->add(keys::heartbeat("rank1"), 1);
  EXPECT_EQ(observer.gone("rank1"), "");
  // The observer reads nothing for 2.5 timeouts (the store stalled for everyone), nor does
  // the member beat (its beats were blocked as well).
  std::this_thread::sleep_for(kTimeout * 5 / 2);
  EXPECT_EQ(observer.gone("rank1"), "") << "the first read after the observer's own gap";
  // From then on, a member that does not beat is gone after the timeout, over the reads.
  const auto since = std::chrono::steady_clock::now();
  const std::string why = judge_every_20ms_for(observer, "rank1", kTimeout * 3);
  EXPECT_NE(why.find("its heartbeat has not moved for"), std::string::npos) << why;
  EXPECT_GE(std::chrono::steady_clock::now() - since, kTimeout);
}

TEST(FtLiveness, AMemberThatStopsBeatingWhileTheObserverReadsIsGoneAfterTheTimeout) {
  auto store = std::make_shared<HashStore>();
  Liveness observer(store, kTimeout);
  store->add(keys::heartbeat("rank1"), 1);
  // It beats for a while, then stops.
  for (int i = 0; i < 10; ++i) {
    store->add(keys::heartbeat("rank1"), 1);
    EXPECT_EQ(observer.gone("rank1"), "");
    std::this_thread::sleep_for(20ms);
  }
  const auto stopped = std::chrono::steady_clock::now();
  const std::string why = judge_every_20ms_for(observer, "rank1", kTimeout * 3);
  EXPECT_NE(why.find("its heartbeat has not moved for"), std::string::npos) << why;
  EXPECT_GE(std::chrono::steady_clock::now() - stopped, kTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, kTimeout * 4);  // a loaded machine's sleeps
}

// The monitor at the shortest interval the Manager takes (half the timeout), its ticks a
// little slow: each read comes more than half the timeout after the last, and a member that
// stops beating is still judged (a threshold of half the timeout judged nobody, a review).
TEST(FtLiveness, ReadsEveryHalfTimeoutAndABitStillJudge) {
  auto store = std::make_shared<HashStore>();
  Liveness observer(store, kTimeout);
  store->add(keys::heartbeat("rank1"), 1);
  std::string why;
  const auto stopped = std::chrono::steady_clock::now();
  for (int i = 0; i < 12 && why.empty(); ++i) {
    why = observer.gone("rank1");
    std::this_thread::sleep_for(kTimeout / 2 + 30ms);
  }
  EXPECT_NE(why.find("its heartbeat has not moved for"), std::string::npos) << why;
  EXPECT_GE(std::chrono::steady_clock::now() - stopped, kTimeout);
}

}  // namespace
}  // namespace ft
}  // namespace distcomm
