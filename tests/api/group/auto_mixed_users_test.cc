// Ranks of one host that run as different users cannot share memory: shm opens a peer's
// segment through /proc/<pid>/fd, which the kernel refuses across users. Found by a user:
// "auto" picked shm for a job with one rank run as nobody, and shm failed with "cannot open
// the peer's segment ...: Permission denied" where gloo ran the same job. "auto" now counts
// each (host, user) as a host of its own: gloo between users, shm within each.
//
// Tests run as root: the ranks named below drop to nobody after fork, before init (where
// the environment forbids that, the tests are skipped, saying why).
#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <thread>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"
#include "api/process/job_identity.h"
#include "api/process_group.h"
#include "api/store/tcp_store.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

constexpr uid_t kNobody = 65534;
constexpr std::chrono::milliseconds kTimeout{60000};

// Makes this process nobody (every uid and gid, no supplementary groups), as a program
// started by `setpriv` or `su` would be. Dropping uids clears the dumpable flag, which
// hides /proc/<pid>/fd even from the same user; a program exec'd as nobody has it set, so
// it is set again (else two nobody ranks could not run shm between them either).
bool become_nobody() {
  return ::setgroups(0, nullptr) == 0 && ::setresgid(kNobody, kNobody, kNobody) == 0 &&
         ::setresuid(kNobody, kNobody, kNobody) == 0 && ::prctl(PR_SET_DUMPABLE, 1) == 0;
}

// "" when a forked child can become nobody here, else why not (not root; a user namespace
// without uid 65534 mapped).
std::string why_no_other_user() {
  if (::geteuid() != 0) return "this test does not run as root, so it cannot run a rank as nobody";
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) ::_exit(become_nobody() ? 0 : 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return "setgroups/setresgid/setresuid to nobody (65534) fails in this environment";
}

// The port rank 0's TCPStore serves on, as it left it in `dir` (read while still root:
// nobody may not reach the test's temporary folder).
int wait_for_port(const std::string& dir) {
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  int port = 0;
  while (!(std::ifstream(dir + "/port") >> port)) {
    if (std::chrono::steady_clock::now() > deadline) throw Timeout("rank 0 did not publish its port in " + dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return port;
}

// The store of one rank: rank 0 serves it (a TCPStore, so that no rank needs a folder that
// another user may not write) and publishes the port. `identity`: one per run, as a launcher
// gives its job.
StorePtr make_store(const std::string& dir, const JobIdentity& identity, int rank, int size) {
  TCPStoreOptions o;
  o.identity = identity;
  o.num_workers = size;
  o.timeout = kTimeout;
  if (rank != 0) {
    o.port = wait_for_port(dir);
    return std::make_shared<TCPStore>(o);
  }
  o.is_server = true;
  auto store = std::make_shared<TCPStore>(o);
  std::ofstream(dir + "/port.tmp") << store->port();
  ::rename((dir + "/port.tmp").c_str(), (dir + "/port").c_str());  // others never read half a number
  return store;
}

// run_group with "auto", where the ranks in `as_nobody` run as nobody. The plugins are
// loaded here first, as root, and the ranks inherit them: nobody may not read the test's
// runfiles, and what is tested is the choice, not the loading.
void run_auto_as_users(int size, const std::set<int>& as_nobody, const std::function<void(ProcessGroup&)>& fn) {
  const PluginSearch plugins = PluginSearch::from_environment();
  ASSERT_TRUE(load_plugin("shm", plugins).available) << "this test needs shm to run here";
  load_plugin("gloo", plugins);
  const std::string dir = testing::make_temp_dir();
  const JobIdentity identity = new_job_identity();
  testing::run_ranks(size, [&](int rank, int world) {
    StorePtr store = make_store(dir, identity, rank, world);
    if (as_nobody.count(rank)) {
      ASSERT_TRUE(become_nobody()) << "rank " << rank << " cannot become nobody";
    }
    ProcessGroupOptions o;
    o.store = store;
    o.rank = rank;
    o.size = world;
    o.backend = "auto";
    o.timeout = kTimeout;
    auto pg = ProcessGroup::create(o);
    fn(*pg);
  });
  testing::remove_temp_dir(dir);
}

// Every rank adds rank + 1: the sum is exact in float.
void expect_exact_all_reduce(ProcessGroup& pg) {
  Tensor t = Tensor::of({static_cast<float>(pg.rank() + 1)});
  pg.all_reduce(t)->wait();
  EXPECT_EQ(t.item(), pg.size() * (pg.size() + 1) / 2.0);
}

TEST(AutoMixedUsers, TwoUsersOfOneHostGoOverGloo) {
  const std::string why_not = why_no_other_user();
  if (!why_not.empty()) GTEST_SKIP() << why_not;
  run_auto_as_users(2, {1}, [](ProcessGroup& pg) {
    EXPECT_EQ(pg.backend_name(), "auto (cpu: gloo)");
    expect_exact_all_reduce(pg);
  });
}

// Two ranks per user: each user's ranks share memory (shm), the users talk over gloo.
TEST(AutoMixedUsers, EachUserIsAHostOfTheHierarchy) {
  const std::string why_not = why_no_other_user();
  if (!why_not.empty()) GTEST_SKIP() << why_not;
  run_auto_as_users(4, {2, 3}, [](ProcessGroup& pg) {
    EXPECT_EQ(pg.backend_name(), "auto (cpu: shm within hosts, gloo across; 2 hosts x 2 ranks (users of 1 machine))");
    expect_exact_all_reduce(pg);
  });
}

}  // namespace
}  // namespace distcomm
