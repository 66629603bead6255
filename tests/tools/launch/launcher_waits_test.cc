// What the launchers of a job say while they wait for each other, and how they end when
// the wait fails, every one of them with the same words:
//  - elastic: a launcher refused for another --max_restarts is named at once by those
//    waiting for machines (they waited 600 s in silence); they say every progress interval
//    how many came; and when a round gives up, the launcher serving the rendezvous store
//    keeps it until the others have read why (one of them lost the store instead).
//  - static: a launcher given another --nproc_per_node after another machine's launcher
//    had started its ranks: that one ends with the mismatch too (it ended on its ranks'
//    lost store); node 0's launcher says every 30 s which node has not checked in.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

const std::vector<std::string> kEnv = {"DISTCOMM_STORE_TOKEN=waits-test-token", "DISTCOMM_RUN_ID=waits-test"};

std::unique_ptr<Subprocess> elastic(const std::string& endpoint, const std::string& nnodes,
                                    const std::vector<std::string>& flags, const std::vector<std::string>& command) {
  std::vector<std::string> all = {"--nnodes=" + nnodes, "--rdzv_endpoint=" + endpoint};
  all.insert(all.end(), flags.begin(), flags.end());
  return std::make_unique<Subprocess>(launch(all, command), kEnv, /*merge_stderr=*/true);
}

std::string last_line(const std::string& text) {
  const std::vector<std::string> lines = lines_of(text);
  return lines.empty() ? "" : lines.back();
}

std::string host_name() {
  char name[256] = {};
  EXPECT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  return name;
}

// Until `pid` has a child (a launcher has started its rank), at most `within`.
bool has_child(pid_t pid, seconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  const std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    std::string children;
    if (std::getline(in, children) && !children.empty()) return true;
    ::usleep(20000);
  }
  return false;
}

// Launcher 2 of a 3-machine job was given --max_restarts=3 where the others use 1: it ends
// saying so, and the two launchers waiting in round 1 (both in: b said "have 2") say at once
// that it was refused and why, and wait on for a launcher given the job's flags.
TEST(LauncherWaits, ElasticLaunchersSayAtOnceThatOneWasRefused) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(local::pick_free_port());
  const std::vector<std::string> flags = {"--rdzv_id=refusal", "--rdzv_timeout_s=20", "--max_restarts=1"};
  std::unique_ptr<Subprocess> a = elastic(endpoint, "3", flags, {"/bin/sleep", "300"});
  std::unique_ptr<Subprocess> b = elastic(endpoint, "3", flags, {"/bin/sleep", "300"});
  // Every 5 s (a quarter of --rdzv_timeout_s=20): both are in round 1, the settings theirs.
  ASSERT_TRUE(b->wait_for_stdout("launch: rendezvous 'refusal' round 1: waiting for machines: have 2 of --nnodes=3 (min 3)",
                                 1, seconds(30)))
      << b->stdout_so_far();
  std::unique_ptr<Subprocess> wrong =
      elastic(endpoint, "3", {"--rdzv_id=refusal", "--rdzv_timeout_s=20", "--max_restarts=3"}, {"/bin/sleep", "300"});
  const Finished refused = wrong->finish(seconds(30));
  EXPECT_EQ(exit_code(refused), 2) << refused.out;
  EXPECT_NE(refused.out.find("--max_restarts=3: the job's launchers use 1"), std::string::npos) << refused.out;
  const std::string said = "launch: rendezvous 'refusal' round 1: refused the launcher on " + host_name() + " (pid " +
                           std::to_string(wrong->pid()) + ") (--max_restarts=3 where the job uses 1); still waiting";
  for (Subprocess* p : {a.get(), b.get()}) {
    EXPECT_TRUE(p->wait_for_stdout(said, 1, seconds(30))) << p->stdout_so_far();
  }
  // They give up at --rdzv_timeout_s, their progress lines naming the refused launcher.
  for (Subprocess* p : {a.get(), b.get()}) {
    const Finished f = p->finish(seconds(60));
    EXPECT_FALSE(f.timed_out) << f.out;
    EXPECT_EQ(exit_code(f), 1) << f.out;
    EXPECT_NE(f.out.find("; refused: the launcher on " + host_name()), std::string::npos) << f.out;
  }
  EXPECT_TRUE(no_orphan_running());
}

// A 4-machine elastic job loses a machine (its launcher killed); the other three wait for a
// fourth in round 2, saying so every 4 s (a quarter of --rdzv_timeout_s=16, which leaves a
// loaded host room for c's ~5 s), and give up together: all three end with the same line.
// Launcher c's rank ignores SIGTERM, so c comes to round 2 some 5 s after the others (its
// rank's SIGKILL): before, the launcher serving the store ended at its own deadline and c
// ended "lost the rendezvous store".
TEST(LauncherWaits, ElasticLaunchersGiveARoundUpTogether) {
  const int port = local::pick_free_port();
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  const std::vector<std::string> flags = {"--rdzv_id=giveup", "--rdzv_timeout_s=16", "--max_restarts=2"};
  const std::vector<std::string> sleeper = {"/bin/sleep", "300"};
  std::unique_ptr<Subprocess> a = elastic(endpoint, "4", flags, sleeper);  // serves the store: started first
  const std::string round1 = "launch: rendezvous 'giveup' round 1: 4 machines (min 4, max 4)\n";
  ASSERT_TRUE(a->wait_for_stdout("launch: rendezvous 'giveup' round 1: waiting for machines: have 1", 1, seconds(30)))
      << a->stdout_so_far();
  std::unique_ptr<Subprocess> b = elastic(endpoint, "4", flags, sleeper);
  std::unique_ptr<Subprocess> c = elastic(endpoint, "4", flags, {"/bin/sh", "-c", "trap '' TERM; exec /bin/sleep 300"});
  std::unique_ptr<Subprocess> d = elastic(endpoint, "4", flags, sleeper);
  for (Subprocess* p : {a.get(), b.get(), c.get(), d.get()}) {
    ASSERT_TRUE(p->wait_for_stdout(round1, 1, seconds(60))) << p->stdout_so_far();
  }
  ASSERT_TRUE(has_child(d->pid(), seconds(30)));
  d->send_signal(SIGKILL);  // its rank dies with it (PR_SET_PDEATHSIG)
  d->finish(seconds(30));
  const std::string waiting = "launch: rendezvous 'giveup' round 2: waiting for machines: have ";
  const std::string gave_up =
      "launch: cannot start the job: rendezvous 'giveup' round 2: only 3 machines of --nnodes min 4 came within "
      "--rdzv_timeout_s=16";
  for (Subprocess* p : {a.get(), b.get()}) {
    EXPECT_TRUE(p->wait_for_stdout(waiting, 1, seconds(60))) << p->stdout_so_far();
  }
  for (Subprocess* p : {a.get(), b.get(), c.get()}) {
    const Finished f = p->finish(seconds(60));
    EXPECT_FALSE(f.timed_out) << f.out;
    EXPECT_EQ(exit_code(f), 1) << f.out;
    EXPECT_EQ(last_line(f.out), gave_up) << f.out;
    EXPECT_EQ(f.out.find("lost the rendezvous store"), std::string::npos) << f.out;
  }
  EXPECT_TRUE(no_orphan_running());
}

// Real ranks (ordered_probe over the store-only any_size backend): they wait in
// init_process_group for the missing node's ranks, on node 0's store.
std::unique_ptr<Subprocess> static_node(int node_rank, int nproc_per_node, const std::string& port) {
  std::vector<std::string> env = kEnv;
  env.push_back("DISTCOMM_PLUGIN_PATH=" + runfile("tests/api/plugins"));
  return std::make_unique<Subprocess>(
      launch({"--nnodes=3", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=" + std::to_string(nproc_per_node),
              "--master_addr=127.0.0.1", "--master_port=" + port, "--backend=any_size"},
             {runfile("tests/tools/launch/ordered_probe")}),
      env, /*merge_stderr=*/true);
}

// Nodes 0 and 1 of a 3-node static job have started their ranks (node 1 agreed with node 0's
// shape); node 2's launcher was given --nproc_per_node=2. All three end with the mismatch:
// node 1's launcher reads node 0's verdict in its store (it ended with its ranks' lost store,
// naming nothing of the flags).
TEST(LauncherWaits, StaticLauncherWhoseRanksStartedEndsWithTheMismatch) {
  const std::string port = std::to_string(local::pick_free_port());
  std::unique_ptr<Subprocess> node0 = static_node(0, 1, port);
  ASSERT_TRUE(has_child(node0->pid(), seconds(30)));
  std::unique_ptr<Subprocess> node1 = static_node(1, 1, port);
  ASSERT_TRUE(has_child(node1->pid(), seconds(30)));  // it agreed: its rank runs
  std::unique_ptr<Subprocess> node2 = static_node(2, 2, port);
  const Finished f0 = node0->finish(seconds(60)), f1 = node1->finish(seconds(60)), f2 = node2->finish(seconds(60));
  const std::string flags = " (--nnodes, --nproc_per_node): give every launcher the same";
  const std::string theirs = "node 2's launcher (on " + host_name() + ") was given 3 nodes x 2 ranks per node" + flags;
  for (const Finished* f : {&f0, &f1, &f2}) {
    EXPECT_FALSE(f->timed_out) << f->out;
    EXPECT_EQ(exit_code(*f), 1) << f->out;
  }
  EXPECT_EQ(last_line(f0.out), "launch: the job cannot run: this launcher (node 0) runs 3 nodes x 1 rank per node, " + theirs)
      << f0.out;
  EXPECT_EQ(last_line(f1.out), "launch: the job cannot run: node 0's launcher runs 3 nodes x 1 rank per node, " + theirs)
      << f1.out;
  EXPECT_EQ(f1.out.find("cannot leave this machine's first failure"), std::string::npos) << f1.out;
  EXPECT_EQ(last_line(f2.out), "launch: the job cannot run: node 0's launcher runs 3 nodes x 1 rank per node, this one "
                               "(node 2) was given 3 nodes x 2 ranks per node" + flags)
      << f2.out;
  EXPECT_TRUE(no_orphan_running());
}

// Node 2's launcher of a 3-node static job never comes: node 0's launcher says which node it
// waits for after 30 s (it said nothing while its ranks waited, up to their 30-minute timeout).
TEST(LauncherWaits, StaticNode0SaysWhichNodeHasNotCheckedIn) {
  const std::string port = std::to_string(local::pick_free_port());
  std::unique_ptr<Subprocess> node0 = static_node(0, 1, port);
  std::unique_ptr<Subprocess> node1 = static_node(1, 1, port);
  ASSERT_TRUE(has_child(node1->pid(), seconds(30)));
  EXPECT_TRUE(node0->wait_for_stdout(
      "launch: waiting for machines: have 2 of --nnodes=3 for 30 s; the launcher of node 2 has not checked in", 1,
      seconds(60)))
      << node0->stdout_so_far();
  for (Subprocess* p : {node1.get(), node0.get()}) {
    p->send_signal(SIGTERM);
    const Finished f = p->finish(seconds(60));
    EXPECT_FALSE(f.timed_out) << f.out;
  }
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
