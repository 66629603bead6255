// What an ft::Manager says while it waits, at its report interval (ManagerOptions::
// report_interval, DISTCOMM_INIT_REPORT_SECONDS): a joiner made before the job's first
// generation stands, and a generation's group whose creation waits for a member. Both
// used to be silent (the first until its op timeout, 30 minutes by default; the second at
// the core's fixed 30 s whatever the Manager's interval).
#include <string>
#include <thread>

#include "tests/ft/manager_harness.h"
#include "tests/testing/forwarding_store.h"

namespace distcomm {
namespace {

class FtManagerWaitingLines : public FtManager {};

// a. A joiner started before the job's first generation (the first members slow to start,
// or one of them never comes) waits for it as its Manager is made, up to op_timeout: it
// says so every report interval, with what the store holds of the first generation.
TEST_F(FtManagerWaitingLines, AJoinerWaitingForTheFirstGenerationSaysWhatItWaitsFor) {
  // rank0 of two arrives at generation 1 and waits there for rank1, which never comes.
  Member& m = add_member("rank0", 0);
  ft::ManagerOptions mo = options(m.id, 2);
  mo.op_timeout = milliseconds(4000);  // its forming's bound: past the joiner's wait
  mo.report_interval = std::chrono::seconds(30);
  m.ft = std::make_unique<ft::Manager>(mo);
  std::thread forming([&] {
    try {
      m.ft->begin_step({&m.state});
    } catch (const Error& e) {
      m.error = e.what();
    }
  });
  PrefixStore ft_keys(ft::keys::kRoot, store_);
  ASSERT_TRUE(eventually([&] { return ft_keys.add(ft::keys::arrivals(1), 0) >= 1 && ft_keys.check({ft::keys::arrival(1, 1)}); }));

  Member& j = add_member("joiner-a", 1);
  ft::ManagerOptions o = options(j.id, -1, /*joining=*/true);
  o.op_timeout = milliseconds(1500);  // how long it waits for the first generation
  o.report_interval = milliseconds(200);
  ::testing::internal::CaptureStderr();
  std::string error = "the joiner's Manager was made without a first generation";
  try {
    j.ft = std::make_unique<ft::Manager>(o);
  } catch (const Timeout& e) {
    error = e.what();
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  forming.join();
  EXPECT_TRUE(contains(error, "ft::Manager: joiner 'joiner-a' waited 1500 ms for the job's first generation (no "
                              "generation yet; arrived at generation 1: rank0)"))
      << error;
  EXPECT_TRUE(contains(said, "ft: joiner 'joiner-a' has waited ")) << said;
  EXPECT_TRUE(contains(said, " for the job's first generation to be formed, before it can check its state against "
                             "the members' (no generation yet; arrived at generation 1: rank0) (it gives up in "))
      << said;
  EXPECT_TRUE(contains(m.error, "forming generation 1 timed out waiting for rank1")) << m.error;
}

// A store whose `set` of a member's arrival at generation 1's group is held back for
// `hold`: that member reaches the group's creation late, as one slow to get there would.
class LateGroupArrival : public testing::ForwardingStore {
 public:
  LateGroupArrival(StorePtr inner, milliseconds hold) : ForwardingStore(std::move(inner)), hold_(hold) {}
  using Store::set;
  void set(const std::string& key, const Bytes& value) override {
    // Fault injection, not synchronisation: the others' creation must wait this long.
    if (contains(key, "gen/1/group") && contains(key, "arrived/1")) std::this_thread::sleep_for(hold_);
    ForwardingStore::set(key, value);
  }

 private:
  const milliseconds hold_;
};

// b. A generation's group whose creation waits for a member says whom it waits for at the
// Manager's report interval (here 200 ms), as its forming does, not at the core's 30 s.
TEST_F(FtManagerWaitingLines, AGroupCreationWaitingForAMemberReportsAtTheManagersInterval) {
  std::vector<Member*> members;
  for (int r = 0; r < 2; ++r) {
    Member& m = add_member("rank" + std::to_string(r), r);
    ft::ManagerOptions o = options(m.id, 2);
    o.report_interval = milliseconds(200);
    if (r == 1) {
      auto late = std::make_shared<LateGroupArrival>(store_, milliseconds(1500));
      o.connect = [late] { return late; };
    }
    m.ft = std::make_unique<ft::Manager>(o);
    members.push_back(&m);
  }
  ::testing::internal::CaptureStderr();
  train_all(members, 1);
  const std::string said = ::testing::internal::GetCapturedStderr();
  expect_consistent(members, 1, [](uint64_t) { return all_of(2); });
  EXPECT_TRUE(contains(said, "group 'ft': init has waited ")) << said;
  EXPECT_TRUE(contains(said, " for ranks [1] to arrive at the store (the fault-tolerant job's store (generation 1 "
                             "(rank0, rank1)))"))
      << said;
}

}  // namespace
}  // namespace distcomm
