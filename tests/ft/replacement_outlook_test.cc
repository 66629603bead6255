// ft::replacement_outlook (ft/replacement_wait.h) over a HashStore holding what a launcher
// writes (launch/replacement_notice.h): which replacements a generation short of members may
// still wait for. A replacement that itself died has its own word, so the chain ends, and
// the survivors do not wait for it for ever.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "api/store/hash_store.h"
#include "ft/generation.h"
#include "ft/liveness.h"
#include "ft/member_record.h"
#include "ft/replacement_wait.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Job {
  std::shared_ptr<HashStore> store = std::make_shared<HashStore>();
  Liveness liveness{store, 3000ms};
  Generation formed;
  Job() {
    formed.number = 2;
    formed.members = {"rank0"};
    for (const char* id : {"rank0", "rank1", "rank2", "rank3"}) record(id);
  }
  // A record of this (live) process under `id`.
  void record(const std::string& id) {
    store->set(keys::member(id), to_bytes(MemberRecord::of_this_process(id, "sig").encode()));
  }
  void dead(const std::string& id) { store->set(keys::dead(id), "its process has exited"); }
  void due(const std::string& ended, const std::string& next, std::chrono::milliseconds in) {
    const auto at = std::chrono::system_clock::now() + in;
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
    store->set(keys::successor(ended), "due|" + next + "|" + std::to_string(ms));
  }
  ReplacementOutlook look(std::chrono::milliseconds deadline_in = 10s) {
    return replacement_outlook(*store, liveness, formed, Clock::now() + deadline_in);
  }
};

using Ids = std::vector<std::string>;

TEST(FtReplacementOutlook, NoLauncherThatReplacesMeansNothingToWaitFor) {
  Job job;
  for (const char* id : {"rank1", "rank2", "rank3"}) job.dead(id);
  const ReplacementOutlook o = job.look();
  EXPECT_FALSE(o.announced);
  EXPECT_TRUE(o.joiners.empty() && o.coming.empty() && o.unsaid.empty() && o.too_late.empty());
}

TEST(FtReplacementOutlook, GoneWithoutAWordYetThenAnnouncedThenRegistered) {
  Job job;
  job.store->set(keys::kReplacedRanks, "0,1,2,3");
  for (const char* id : {"rank1", "rank2", "rank3"}) job.dead(id);
  EXPECT_TRUE(job.look().announced);
  EXPECT_EQ(job.look().unsaid, (Ids{"rank1", "rank2", "rank3"}));

  job.due("rank1", "rank1+1", 1000ms);
  job.due("rank2", "rank2+1", 1000ms);
  job.store->set(keys::successor("rank3"), "none|not replaced again: rank 3 has had 3 replacements");
  ReplacementOutlook o = job.look();
  EXPECT_EQ(o.coming, (Ids{"rank1+1", "rank2+1"}));
  EXPECT_TRUE(o.unsaid.empty());
  ASSERT_EQ(o.none.size(), 1u);
  EXPECT_EQ(o.none[0].rfind("rank3: not replaced again", 0), 0u) << o.none[0];

  // rank1+1 started (its record) and asked to join: it can be taken in now.
  job.record("rank1+1");
  job.store->add(keys::kJoiners, 1);
  job.store->set(keys::joiner(1), "rank1+1");
  o = job.look();
  EXPECT_EQ(o.joiners, (Ids{"rank1+1"}));
  EXPECT_EQ(o.coming, (Ids{"rank2+1"}));
}

TEST(FtReplacementOutlook, AReplacementDueAfterTheDeadlineComesTooLate) {
  Job job;
  job.store->set(keys::kReplacedRanks, "0,1,2,3");
  job.dead("rank1");
  job.due("rank1", "rank1+1", 60000ms);
  const ReplacementOutlook o = job.look(/*deadline_in=*/5s);
  EXPECT_TRUE(o.coming.empty());
  EXPECT_EQ(o.too_late, (Ids{"rank1+1"}));
}

// The chain: rank1 -> rank1+1, which died before it joined -> rank1+2 (due), or none.
TEST(FtReplacementOutlook, AReplacementThatDiedIsFollowedToItsSuccessorOrToNone) {
  Job job;
  job.store->set(keys::kReplacedRanks, "0,1");
  job.dead("rank1");
  job.due("rank1", "rank1+1", 0ms);
  job.record("rank1+1");
  job.dead("rank1+1");
  EXPECT_EQ(job.look().unsaid, (Ids{"rank1+1"}));  // its launcher's word comes
  job.due("rank1+1", "rank1+2", 1000ms);
  EXPECT_EQ(job.look().coming, (Ids{"rank1+2"}));
  job.store->set(keys::successor("rank1+1"), "none|not replaced again: rank 1 has had 1 replacements");
  const ReplacementOutlook o = job.look();
  EXPECT_TRUE(o.coming.empty() && o.unsaid.empty() && o.joiners.empty());
  EXPECT_EQ(o.none.size(), 1u);
}

// A program that names its members itself ("trainer-1"): the launcher's words name ids that
// never come, so they are not followed.
TEST(FtReplacementOutlook, MembersOfTheProgramsOwnNamesAreNotFollowed) {
  Job job;
  job.formed.members = {"trainer-0"};
  auto store = std::make_shared<HashStore>();
  Liveness liveness(store, 3000ms);
  store->set(keys::kReplacedRanks, "0,1");
  store->set(keys::successor("rank1"), "due|rank1+1|0");
  const ReplacementOutlook o = replacement_outlook(*store, liveness, job.formed, Clock::now() + 10s);
  EXPECT_TRUE(o.coming.empty() && o.unsaid.empty());
}

}  // namespace
}  // namespace ft
}  // namespace distcomm
