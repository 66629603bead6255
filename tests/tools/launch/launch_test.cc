// The launcher binary end to end: real processes, real pipes, real signals.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "api/version.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kProbe = rank_probe_path();

// The pids of "ready <pid> <grandchild>" lines: every rank and what it started.
std::vector<pid_t> ready_pids(const std::string& out) {
  std::vector<pid_t> pids;
  std::regex ready(R"(ready (\d+) (\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), ready), end; it != end; ++it) {
    pids.push_back(std::stoi((*it)[1]));
    pids.push_back(std::stoi((*it)[2]));
  }
  return pids;
}

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

void expect_all_gone(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) EXPECT_FALSE(process_exists(pid)) << "pid " << pid << " survived the job (or was not reaped)";
}

// Whether this machine can listen on IPv6's loopback (containers may have no IPv6).
bool ipv6_loopback_usable() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

// --master_addr=[::1], as a URL writes it, is the address inside the brackets (a review got
// "cannot listen on [[::1]]:0").
TEST(Launch, ABracketedIPv6MasterAddressIsTheAddressInside) {
  if (!ipv6_loopback_usable()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  Finished f = run(launch({"--nproc_per_node=1", "--master_addr=[::1]", "--backend=gloo"}, {kProbe, "env"}));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  EXPECT_NE(f.out.find(" MASTER_ADDR=::1 "), std::string::npos) << f.out;
}

TEST(Launch, GivesEachRankItsEnvironmentAndOnePort) {
  Finished f = run(launch({"--nproc_per_node=3", "--backend=gloo"}, {kProbe, "env"}));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  std::regex line(R"(\[rank (\d)\] RANK=(\d) WORLD_SIZE=3 LOCAL_RANK=(\d) LOCAL_WORLD_SIZE=3 )"
                  R"(MASTER_ADDR=127\.0\.0\.1 MASTER_PORT=(\d+) DISTCOMM_BACKEND=gloo OMPI_COMM_WORLD_RANK=<unset> .*)");
  std::set<int> ranks, ports;
  for (const std::string& l : lines_of(f.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << l;
    EXPECT_EQ(m[1], m[2]) << "prefix and RANK differ: " << l;
    EXPECT_EQ(m[2], m[3]) << "one machine: LOCAL_RANK is RANK: " << l;
    EXPECT_NE(l.find(" DISTCOMM_STORE_SERVED_BY=launcher "), std::string::npos) << "the launcher serves the store: " << l;
    // torchrun sets it in every job: --rdzv_id, "none" by default.
    EXPECT_NE(l.find(" TORCHELASTIC_RUN_ID=none "), std::string::npos) << "a static job's run id, as torchrun's: " << l;
    ranks.insert(std::stoi(m[2]));
    ports.insert(std::stoi(m[4]));
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
  ASSERT_EQ(ports.size(), 1u) << "every rank must be given the same port";
  EXPECT_GT(*ports.begin(), 0) << "port 0 must be replaced by a real free port";
}

// A rank gets standard input, output and error and no other descriptor: not the launcher's
// store sockets (they were /dev/null copies after the fork), nor the /dev/null opened for
// standard input, nor what the launcher inherited, as torchrun's workers (Python's
// close_fds). Before (a shell's listing, the launcher run with fd 9 open): "0 1 10 13 14 15 2
// 22 251 9".
TEST(Launch, ARankGetsOnlyStandardInputOutputAndError) {
  Finished f = run(launch({"--nproc_per_node=2"}, {kProbe, "fds"}));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  for (const std::string& l : lines_of(f.out)) EXPECT_TRUE(l == "[rank 0] fds: 0 1 2" || l == "[rank 1] fds: 0 1 2") << l;
  EXPECT_EQ(lines_of(f.out).size(), 2u) << f.out;
}

// torchrun's --standalone is what the launcher does on one machine anyway: accepted, with
// the flags that agree with it.
TEST(Launch, StandaloneIsOneMachineAtAFreePort) {
  Finished f = run(launch({"--standalone", "--nproc_per_node=2", "--nnodes=1"}, {kProbe, "env"}));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  std::regex line(R"(\[rank (\d)\] RANK=\d WORLD_SIZE=2 .* MASTER_ADDR=127\.0\.0\.1 MASTER_PORT=([1-9]\d*) .*)");
  std::set<std::string> ranks;
  for (const std::string& l : lines_of(f.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << l;
    ranks.insert(m[1]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"})) << f.out;

  // Each run is named afresh, as torchrun's uuid names it (before: "none", every run alike),
  // one name for all its ranks; a --rdzv_id given stands.
  auto run_ids = [](const std::vector<std::string>& flags) {
    Finished g = run(launch(flags, {kProbe, "env"}));
    EXPECT_EQ(exit_code(g), 0) << g.err;
    std::set<std::string> ids;
    const std::regex id(R"( TORCHELASTIC_RUN_ID=(\S+) )");
    for (const std::string& l : lines_of(g.out)) {
      std::smatch m;
      if (std::regex_search(l, m, id)) ids.insert(m[1]);
    }
    return ids;
  };
  const std::set<std::string> first = run_ids({"--standalone", "--nproc_per_node=2"});
  const std::set<std::string> second = run_ids({"--standalone", "--nproc_per_node=2"});
  ASSERT_EQ(first.size(), 1u) << "one run id for every rank of a run";
  ASSERT_EQ(second.size(), 1u);
  EXPECT_TRUE(std::regex_match(*first.begin(), std::regex("[0-9a-f]{32}"))) << *first.begin();
  EXPECT_NE(*first.begin(), *second.begin()) << "two runs, one name";
  EXPECT_EQ(run_ids({"--standalone", "--nproc_per_node=1", "--rdzv_id=mine"}), std::set<std::string>{"mine"});
  ::setenv("PET_RDZV_ID", "from_pet", 1);
  EXPECT_EQ(run_ids({"--standalone", "--nproc_per_node=1"}), std::set<std::string>{"from_pet"}) << "PET_RDZV_ID";
  ::unsetenv("PET_RDZV_ID");
}

TEST(Launch, MultiNodeRanksAndExplicitAddressPassThrough) {
  Finished f = run(launch({"--nproc_per_node=2", "--nnodes=3", "--node_rank=1", "--master_addr=10.1.2.3",
                           "--master_port=29876"},
                          {kProbe, "env"}),
                   seconds(60), {"OMPI_COMM_WORLD_RANK=7"});
  ASSERT_EQ(exit_code(f), 0) << f.err;
  std::string out = f.out;
  EXPECT_NE(out.find("[rank 2] RANK=2 WORLD_SIZE=6 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=10.1.2.3 "
                     "MASTER_PORT=29876 DISTCOMM_BACKEND=<unset> OMPI_COMM_WORLD_RANK=<unset>"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[rank 3] RANK=3 WORLD_SIZE=6 LOCAL_RANK=1"), std::string::npos) << out;
  // Node 0's launcher serves the store: the ranks of every machine are told so.
  EXPECT_NE(out.find(" DISTCOMM_STORE_SERVED_BY=launcher "), std::string::npos) << out;
}

TEST(Launch, RankExitingNonZeroStopsTheJobAndIsNamed) {
  auto start = std::chrono::steady_clock::now();
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "fail", "1", "3"}));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(exit_code(f), 3) << "the launcher exits with the failed rank's code";
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed: exit code 3"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("stopping 2 ranks"), std::string::npos) << f.err;
  // The last line names the cause, also where it was the first failure seen.
  const std::string last = f.err.substr(f.err.rfind('\n', f.err.size() - 2) + 1);
  EXPECT_TRUE(std::regex_match(last, std::regex(R"(launch: rank 1 \(local rank 1, pid \d+\) failed first \(exit code 3\)\n)")))
      << last;
  EXPECT_EQ(ready_pids(f.out).size(), 4u) << f.out;
  expect_all_gone(ready_pids(f.out));
  EXPECT_LT(took, seconds(4)) << "SIGTERM, not the 5 s grace period, should end the others";
}

// A launcher killed with SIGKILL leaves its error-file folder in TMPDIR; the next launcher
// of this user removes it, with its files, but not a folder whose launcher still runs
// (this test process stands for one), nor another PID namespace's or boot's (another
// host's, on a shared TMPDIR), nor a name it did not make. Its own folder goes at its end, as always.
TEST(Launch, FoldersOfKilledLaunchersAreRemovedByTheNextOne) {
  const std::string tmp = fresh_tmpdir("stale");
  char link[64] = {};
  ASSERT_GT(::readlink("/proc/self/ns/pid", link, sizeof(link) - 1), 0);
  std::string boot;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
  boot.erase(std::remove(boot.begin(), boot.end(), '-'), boot.end());
  ASSERT_GE(boot.size(), 12u);
  const std::string ns = boot.substr(0, 12) + "-" + std::regex_replace(link, std::regex(R"(pid:\[(\d+)\])"), "$1");
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  const std::string stale = tmp + "/distcomm-launch-" + ns + "-" + std::to_string(gone) + "-abcdef";
  const std::string live = tmp + "/distcomm-launch-" + ns + "-" + std::to_string(::getpid()) + "-abcdef";
  const std::string other_ns = tmp + "/distcomm-launch-" + boot.substr(0, 12) + "-1-" + std::to_string(gone) + "-abcdef";
  const std::string other_host = tmp + "/distcomm-launch-000000000000-" + ns.substr(13) + "-" + std::to_string(gone) + "-abcdef";
  const std::string old_style = tmp + "/distcomm-launch-abcdef";
  for (const std::string& dir : {stale, live, other_ns, other_host, old_style}) ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0) << dir;
  std::ofstream(stale + "/rank_0.error") << "{}";
  Finished f = run(launch({"--nproc_per_node=1"}, {kProbe, "env"}), seconds(60), {"TMPDIR=" + tmp});
  ASSERT_EQ(exit_code(f), 0) << f.err;
  std::vector<std::string> left = entries_of(tmp);
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected = {other_ns.substr(tmp.size() + 1), other_host.substr(tmp.size() + 1),
                                       old_style.substr(tmp.size() + 1), live.substr(tmp.size() + 1)};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(left, expected);
}

// Rank 1 fails first but is still exiting when rank 0, failing because of it, is seen
// exiting: the launcher names rank 1, from the time in its error file.
TEST(Launch, TheRankThatFailedFirstIsTheCause) {
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "cascade", "1"}));
  EXPECT_EQ(exit_code(f), 5) << "the launcher exits with the first failure's code: " << f.err;
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed first (exit code 5): the cause"), std::string::npos) << f.err;
}

// Rank 1 found the failure; ranks 0 and 2 adopted it (their reports say so) and wrote
// theirs first, with earlier times, and exited at once; the stop's SIGTERM ended rank 1.
// The launcher names rank 1, and exits with 1 (its error), not 143 (the stop's signal).
TEST(Launch, TheRankWhoseFailureTheOthersAdoptedIsTheCause) {
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "adopted", "1"}));
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed first (reported its error; the stop ended it by SIGTERM): Desync: found by this rank"),
            std::string::npos)
      << f.err;
}

// Rank 1 found the failure, and the ranks it cut off report it and exit before rank 1 has
// written its own report (as a real finder publishes and cuts first). The launcher holds
// the stop's SIGTERM for it (local::kAdoptedFailureHold): without that, the SIGTERM ended
// rank 1 unreported and the launcher named rank 0 or 2, who only adopted its failure.
TEST(Launch, TheStopWaitsForTheRankWhoseFailureWasAdopted) {
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "late_finder", "1"}));
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed first (exit code 1): Desync: found by this rank"), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("SIGTERM"), std::string::npos) << "no rank should need stopping: " << f.err;
}

// Whether the process whose pid `pid_file` holds (once written) has died within `limit`:
// a zombie the stopped launcher has not reaped counts.
bool dead_within(const std::string& pid_file, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto dead = [&] {
    const std::string pid = read_file(pid_file);
    if (pid.empty()) return false;
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string field, name, state;
    return !(stat >> field >> name >> state) || state == "Z";
  };
  while (!dead() && std::chrono::steady_clock::now() < deadline) ::usleep(1000);
  return dead();
}

// Rank 1 is killed from outside while the launcher cannot run (stopped); the others notice
// its death and report it, with times before the launcher sees any exit. The launcher must
// still name rank 1, whose death came first, not one of the ranks that reported it.
TEST(Launch, ARankKilledFromOutsideIsTheCauseOfTheReportsAboutIt) {
  Subprocess p(launch({"--nproc_per_node=3"}, {kProbe, "victim", "1"}));
  ASSERT_TRUE(p.wait_for_stdout("victim ", 1, seconds(30)));
  const pid_t victim = std::stoi(read_file(temp_path("victim_pid")));
  p.send_signal(SIGSTOP);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  // Until both reporters have exited (zombies the stopped launcher has not reaped): the
  // launcher then sees all three exits at once, and must pick the cause by time.
  for (int rank : {0, 2}) {
    ASSERT_TRUE(dead_within(temp_path("reported_" + std::to_string(rank)), seconds(30)))
        << "rank " << rank << " never reported the death and exited";
  }
  p.send_signal(SIGCONT);
  Finished f = p.finish(seconds(30));
  EXPECT_EQ(exit_code(f), 128 + SIGKILL) << f.err;
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(rank 1 \(local rank 1, pid \d+\) failed first \(signal SIGKILL)")))
      << f.err;
}

// The same for a rank that exits with a code of its own (_exit(3), no error file): the
// others report its loss before the stopped launcher sees its exit, and are not the cause
// (helper-68: the launcher named a survivor, 1 run in 10 under load, and exited 1).
TEST(Launch, ARankThatExitsWithACodeIsTheCauseOfTheReportsAboutIt) {
  Subprocess p(launch({"--nproc_per_node=3"}, {kProbe, "victim", "1", "exit"}));
  ASSERT_TRUE(p.wait_for_stdout("victim ", 1, seconds(30)));
  const pid_t victim = std::stoi(read_file(temp_path("victim_pid")));
  p.send_signal(SIGSTOP);
  ASSERT_EQ(::kill(victim, SIGUSR2), 0);
  for (int rank : {0, 2}) {
    ASSERT_TRUE(dead_within(temp_path("reported_" + std::to_string(rank)), seconds(30)))
        << "rank " << rank << " never reported the death and exited";
  }
  p.send_signal(SIGCONT);
  Finished f = p.finish(seconds(30));
  EXPECT_EQ(exit_code(f), 3) << f.err;
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(rank 1 \(local rank 1, pid \d+\) failed first \(exit code 3\))")))
      << f.err;
}

// Two ranks die together, by signals the launcher did not send: both are named, the one
// that is not the cause in the line before the last (helper-68: the second one, a SIGSEGV,
// was never mentioned). Here both are dead before the launcher looks, so one poll reaps
// both; the race helper-68 hit (the second reaped only after the stop began) is
// LocalProcesses.AChildDeadBeforeTheStopIsNotMarkedStopped's.
TEST(Launch, TwoRanksThatDieTogetherAreBothNamed) {
  Subprocess p(launch({"--nproc_per_node=4"}, {kProbe, "victims", "1", "2"}));
  ASSERT_TRUE(p.wait_for_stdout("victim ", 2, seconds(30)));
  p.send_signal(SIGSTOP);
  for (auto [rank, sig] : {std::pair<int, int>{1, SIGKILL}, {2, SIGSEGV}}) {
    const std::string pid_file = temp_path("victim_pid_" + std::to_string(rank));
    ASSERT_EQ(::kill(std::stoi(read_file(pid_file)), sig), 0);
    ASSERT_TRUE(dead_within(pid_file, seconds(30))) << "rank " << rank << " did not die";
  }
  p.send_signal(SIGCONT);
  Finished f = p.finish(seconds(30));
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(rank 1 \(local rank 1, pid \d+\) failed first \(signal SIGKILL)")))
      << f.err;
  EXPECT_TRUE(std::regex_search(
      f.err, std::regex(R"(also failed, with no error file: rank 2 \(pid \d+, signal SIGSEGV \(Segmentation fault\)\))")))
      << f.err;
}

TEST(Launch, RankKilledBySignalIsNamed) {
  Finished f = run(launch({"--nproc_per_node=3"}, {kProbe, "signal", "2", std::to_string(SIGSEGV)}));
  EXPECT_EQ(exit_code(f), 128 + SIGSEGV);
  EXPECT_NE(f.err.find("rank 2 (local rank 2, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed: signal SIGSEGV (Segmentation fault)"), std::string::npos) << f.err;
  expect_all_gone(ready_pids(f.out));
}

TEST(Launch, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  Subprocess p(launch({"--nproc_per_node=2", "--grace_period_s=0.5"}, {kProbe, "wait", "ignore_term"}));
  ASSERT_TRUE(p.wait_for_stdout("ready", 2, seconds(30)));
  p.send_signal(SIGTERM);
  Finished f = p.finish(seconds(10));
  EXPECT_EQ(exit_code(f), 128 + SIGTERM);
  EXPECT_NE(f.err.find("got SIGTERM: stopping 2 ranks (SIGTERM, then SIGKILL after 0.5s)"), std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find("rank 0 is still running: SIGKILL"), std::string::npos) << f.err;
  expect_all_gone(ready_pids(f.out));
}

// --on_failure=continue lets the others run on after a failure; a rank that is stopped
// (SIGSTOP) when every other rank has ended can never end by itself, nor be resumed by
// anything in the job. After the grace period so, it is stopped as a failed job's ranks are,
// and the job ends with the first failure. Before: the launcher waited for it for ever.
TEST(Launch, OnFailureContinueEndsRanksLeftStoppedAfterTheOthersEnded) {
  const auto start = std::chrono::steady_clock::now();
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue", "--grace_period_s=1"},
                          {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then kill -STOP $$; fi; exit 3"}),
                   seconds(30));
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  EXPECT_EQ(exit_code(f), 3) << f.err;
  EXPECT_NE(f.err.find("rank(s) 1 stopped by job control (SIGSTOP, SIGTSTP) for 1s while every other rank here has ended after a failure"),
            std::string::npos)
      << f.err;
  EXPECT_LT(took.count(), 15000) << f.err;
}

// A rank that is stopped (SIGSTOP: hung, paused) gets SIGCONT after the stop's signal, so
// it acts on it at once instead of waiting for SIGKILL at the end of the grace period.
TEST(Launch, AStoppedRankIsContinuedToActOnTheStopSignal) {
  Subprocess p(launch({"--nproc_per_node=2", "--grace_period_s=30"}, {kProbe, "wait"}));
  ASSERT_TRUE(p.wait_for_stdout("ready", 2, seconds(30)));
  const std::vector<pid_t> pids = ready_pids(p.stdout_so_far());
  ASSERT_EQ(pids.size(), 4u);
  ASSERT_EQ(::kill(pids[0], SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  p.send_signal(SIGTERM);
  Finished f = p.finish(seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10)) << f.err;
  EXPECT_EQ(exit_code(f), 128 + SIGTERM) << f.err;
  EXPECT_EQ(f.err.find("still running: SIGKILL"), std::string::npos) << f.err;
  expect_all_gone(ready_pids(f.out));
}

// A job's torchrun command line runs as it is: its flags for the rendezvous, the Python
// worker and the polling are taken; the ranks get torchrun's role variables (one role: the
// job's ranks) and OMP_NUM_THREADS=1 where several share the machine and the caller set
// none; PET_<FLAG> gives a flag the command line does not.
TEST(Launch, TorchrunsCommandLineAndVariablesAreTaken) {
  const std::string show = "echo RANK=$RANK ROLE_NAME=$ROLE_NAME ROLE_RANK=$ROLE_RANK ROLE_WORLD_SIZE=$ROLE_WORLD_SIZE "
                           "OMP_NUM_THREADS=${OMP_NUM_THREADS-unset}";
  Finished f = run(launch({"--rdzv_backend=static", "--no-python", "--monitor_interval=5", "--start_method=fork",
                           "--role=trainer", "--nproc_per_node=2"},
                          {"sh", "-c", show}),
                   seconds(30), {"ROLE_RANK=7", "OMP_NUM_THREADS="});
  ASSERT_EQ(exit_code(f), 0) << f.err;
  std::set<std::string> lines;
  for (const std::string& l : lines_of(f.out)) lines.insert(l);
  // An inherited ROLE_RANK is not this job's; a caller's OMP_NUM_THREADS (even empty) stands.
  EXPECT_EQ(lines, (std::set<std::string>{"[rank 0] RANK=0 ROLE_NAME=trainer ROLE_RANK=0 ROLE_WORLD_SIZE=2 OMP_NUM_THREADS=",
                                          "[rank 1] RANK=1 ROLE_NAME=trainer ROLE_RANK=1 ROLE_WORLD_SIZE=2 OMP_NUM_THREADS="}))
      << f.out;

  // Unset: 1 per rank (docs/launch.md says so; a line each job would be noise). PET_NPROC_PER_NODE
  // gives the count; the command line wins over it.
  const std::vector<std::string> unset_omp = {"PET_NPROC_PER_NODE=3"};
  ::unsetenv("OMP_NUM_THREADS");
  f = run(launch({}, {"sh", "-c", show}), seconds(30), unset_omp);
  ASSERT_EQ(exit_code(f), 0) << f.err;
  EXPECT_EQ(lines_of(f.out).size(), 3u) << f.out;
  EXPECT_NE(f.out.find("[rank 2] RANK=2 ROLE_NAME=default ROLE_RANK=2 ROLE_WORLD_SIZE=3 OMP_NUM_THREADS=1"),
            std::string::npos)
      << f.out;
  f = run(launch({"--nproc_per_node=1"}, {"sh", "-c", show}), seconds(30), unset_omp);
  EXPECT_EQ(f.out, "[rank 0] RANK=0 ROLE_NAME=default ROLE_RANK=0 ROLE_WORLD_SIZE=1 OMP_NUM_THREADS=unset\n") << f.err;
}

// SIGQUIT stops the job as SIGTERM does (torchrun's agent handles it too): before, the
// launcher died of it at once, without a word, and the ranks got no grace period.
TEST(Launch, SigquitStopsEveryRank) {
  Subprocess p(launch({"--nproc_per_node=2"}, {kProbe, "wait"}));
  ASSERT_TRUE(p.wait_for_stdout("ready", 2, seconds(30)));
  p.send_signal(SIGQUIT);
  Finished f = p.finish(seconds(10));
  ASSERT_FALSE(f.timed_out);
  EXPECT_EQ(exit_code(f), 128 + SIGQUIT) << f.err;
  EXPECT_NE(f.err.find("launch: got SIGQUIT: stopping 2 ranks"), std::string::npos) << f.err;
  expect_all_gone(ready_pids(f.out));
}

TEST(Launch, CtrlCStopsEveryRankAndWhatTheyStarted) {
  Subprocess p(launch({"--nproc_per_node=3"}, {kProbe, "wait"}));
  ASSERT_TRUE(p.wait_for_stdout("ready", 3, seconds(30)));
  auto start = std::chrono::steady_clock::now();
  p.send_signal(SIGINT);
  Finished f = p.finish(seconds(10));
  ASSERT_FALSE(f.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(3)) << "the stopping signal (SIGINT), not SIGKILL after 5 s, ends them";
  EXPECT_EQ(exit_code(f), 128 + SIGINT);
  EXPECT_NE(f.err.find("launch: got SIGINT: stopping 3 ranks"), std::string::npos) << f.err;
  std::vector<pid_t> pids = ready_pids(f.out);
  EXPECT_EQ(pids.size(), 6u);
  expect_all_gone(pids);
}

// The signal that stops the launcher is the one its ranks get, as torchrun's agent passes it
// on: a program's Ctrl-C handler runs under the launcher too (the ranks lead process groups
// of their own, which the terminal's SIGINT does not reach). Before, they always got SIGTERM.
// A rank's failure stops the others with SIGTERM.
TEST(Launch, TheRanksGetTheSignalThatStoppedTheLauncher) {
  for (const auto& [sig, name] : {std::pair<int, std::string>{SIGINT, "SIGINT"}, {SIGHUP, "SIGHUP"},
                                  {SIGTERM, "SIGTERM"}}) {
    Subprocess p(launch({"--nproc_per_node=2"}, {kProbe, "say_signal"}));
    ASSERT_TRUE(p.wait_for_stdout("ready", 2, seconds(30))) << name;
    p.send_signal(sig);
    Finished f = p.finish(seconds(10));
    ASSERT_FALSE(f.timed_out) << name;
    EXPECT_EQ(exit_code(f), 128 + sig) << name << ": " << f.err;
    for (int rank : {0, 1}) {
      EXPECT_NE(f.out.find("rank " + std::to_string(rank) + " got " + name), std::string::npos)
          << name << ", rank " << rank << ": " << f.out;
    }
    EXPECT_NE(f.err.find("launch: got " + name + ": stopping 2 ranks (" + name + ", then SIGKILL"), std::string::npos)
        << f.err;
  }
}

TEST(Launch, LogDirHoldsOneFilePerRankAndTeeCopiesToTheTerminal) {
  std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/logs/nested";
  Finished quiet = run(launch({"--nproc_per_node=2", "--log_dir=" + dir}, {kProbe, "lines", "3"}));
  ASSERT_EQ(exit_code(quiet), 0) << quiet.err;
  EXPECT_EQ(quiet.out, "") << "without --tee the output goes to the files only";
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream file(dir + "/rank_" + std::to_string(rank) + ".log");
    std::stringstream content;
    content << file.rdbuf();
    std::vector<std::string> lines = lines_of(content.str());
    ASSERT_EQ(lines.size(), 6u) << "3 lines to stdout and 3 to stderr";
    for (const std::string& l : lines) {
      EXPECT_EQ(l.rfind("rank " + std::to_string(rank) + " line ", 0), 0u) << "unprefixed, own rank only: " << l;
    }
  }
  Finished tee = run(launch({"--nproc_per_node=2", "--log_dir=" + dir, "--tee"}, {kProbe, "lines", "3"}));
  ASSERT_EQ(exit_code(tee), 0) << tee.err;
  EXPECT_EQ(lines_of(tee.out).size(), 6u);
  EXPECT_NE(tee.out.find("[rank 1] rank 1 line 2 "), std::string::npos);
}

TEST(Launch, RanksFilterChoosesWhoseOutputIsShown) {
  Finished f = run(launch({"--nproc_per_node=4", "--ranks_filter=0,2"}, {kProbe, "env"}));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  std::vector<std::string> lines = lines_of(f.out);
  ASSERT_EQ(lines.size(), 2u) << f.out;
  std::set<std::string> prefixes = {lines[0].substr(0, 8), lines[1].substr(0, 8)};
  EXPECT_EQ(prefixes, (std::set<std::string>{"[rank 0]", "[rank 2]"}));
}

TEST(Launch, LinesAreNeverSplitOrMixed) {
  const int kLines = 300;
  Finished f = run(launch({"--nproc_per_node=4"}, {kProbe, "lines", std::to_string(kLines)}));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  for (const std::string* stream : {&f.out, &f.err}) {
    std::map<int, int> next_line;  // per rank: lines arrive whole and in order
    std::regex line(R"(\[rank (\d)\] rank (\d) line (\d+) (x+))");
    for (const std::string& l : lines_of(*stream)) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(l, m, line)) << "a broken line: " << l.substr(0, 80);
      int rank = std::stoi(m[1]);
      ASSERT_EQ(m[1], m[2]);
      ASSERT_EQ(std::stoi(m[3]), next_line[rank]++);
      ASSERT_EQ(m[4].length(), static_cast<size_t>(200 + 37 * rank));
    }
    for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(next_line[rank], kLines) << "rank " << rank;
  }
}

TEST(Launch, OrderedPrintComesOutInRankOrder) {
  Finished f = run(launch({"--nproc_per_node=4", "--backend=any_size"}, {runfile("tests/tools/launch/ordered_probe")}),
                   seconds(60), {"DISTCOMM_PLUGIN_PATH=" + runfile("tests/api/plugins")});
  ASSERT_EQ(exit_code(f), 0) << f.err;
  // One prefix per line: the program's, which names the rank the line is about (rank 0
  // printed them all), not the launcher's as well.
  std::string expected;
  for (int r = 0; r < 4; ++r) {
    expected += "[rank " + std::to_string(r) + "/4] hello from rank " + std::to_string(r) + "\n";
    expected += "[rank " + std::to_string(r) + "/4] second line of rank " + std::to_string(r) + "\n";
  }
  EXPECT_EQ(f.out, expected);
}

// A rank that ends before it calls init (here with exit code 0, which stops nothing) is named
// by the others' init within moments: the launcher tells the store, where the world's
// creation looks. Before, they waited for it until their timeout, 30 minutes (helper-73).
TEST(Launch, ARankThatEndsBeforeInitIsNamedByTheOthersInit) {
  const auto start = std::chrono::steady_clock::now();
  Finished f = run(launch({"--nproc_per_node=3", "--backend=any_size"},
                          {"sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 0; fi; exec \"$0\"",
                           runfile("tests/tools/launch/ordered_probe")}),
                   seconds(60), {"DISTCOMM_PLUGIN_PATH=" + runfile("tests/api/plugins")});
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20)) << f.err;
  EXPECT_NE(exit_code(f), 0) << f.err;
  EXPECT_NE(f.err.find("rank 1 ended (exit code 0) before it joined init_process_group's world group: the launcher saw it end"),
            std::string::npos)
      << f.err;
}

// Two machines' launchers on this one: node 0's serves the job's store, and node 1's ranks,
// started first, wait for it and join. (Node 1's launcher serves nothing: its port stays free
// for node 0's.)
TEST(Launch, NodeZerosLauncherServesAStaticJobsStore) {
  const int port = local::pick_free_port();
  const std::vector<std::string> env = {"DISTCOMM_PLUGIN_PATH=" + runfile("tests/api/plugins"),
                                        "DISTCOMM_RUN_ID=two_nodes", "DISTCOMM_STORE_TOKEN=secret"};
  auto node = [&](int n) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(n), "--nproc_per_node=2",
                   "--master_port=" + std::to_string(port), "--backend=any_size"},
                  {runfile("tests/tools/launch/ordered_probe")});
  };
  Subprocess node1(node(1), env);
  ::usleep(300000);  // node 1's ranks wait for node 0's launcher meanwhile
  Finished node0 = run(node(0), seconds(60), env);
  Finished f1 = node1.finish(seconds(60));
  ASSERT_EQ(exit_code(node0), 0) << node0.err;
  ASSERT_EQ(exit_code(f1), 0) << f1.err;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(node0.out.find("[rank " + std::to_string(r) + "/4] hello from rank " + std::to_string(r) + "\n"),
              std::string::npos)
        << node0.out;
  }
}

// Node 0's ranks end first; node 1's use the job's store 1.5 s later. Node 0's launcher keeps
// the store until they have left it (helper-53's review: it left 16 ms after its own ranks,
// taking the store with it, while node 1's ranks still ran).
TEST(Launch, NodeZerosLauncherKeepsTheStoreUntilTheOtherMachinesRanksLeave) {
  const int port = local::pick_free_port();
  const std::vector<std::string> env = {"DISTCOMM_PLUGIN_PATH=" + runfile("tests/api/plugins"),
                                        "DISTCOMM_RUN_ID=two_nodes_late", "DISTCOMM_STORE_TOKEN=secret"};
  auto node = [&](int n) {
    return launch({"--nnodes=2", "--node_rank=" + std::to_string(n), "--nproc_per_node=1",
                   "--master_port=" + std::to_string(port), "--backend=any_size"},
                  {runfile("tests/tools/launch/ordered_probe"), "late_store_use"});
  };
  Subprocess node1(node(1), env);
  Finished node0 = run(node(0), seconds(60), env);
  Finished f1 = node1.finish(seconds(60));
  EXPECT_EQ(exit_code(node0), 0) << node0.err;
  EXPECT_EQ(exit_code(f1), 0) << f1.out << f1.err;
  EXPECT_NE(f1.out.find("[rank 1] rank 1: late store op ok"), std::string::npos) << f1.out << f1.err;
  EXPECT_NE(node0.err.find("launch: kept the job's store "), std::string::npos) << node0.err;
}

// --serve_store=false: the launcher neither serves the store nor says it does, and rank 0
// serves it at the port it was given (a program with a store of its own there, such as
// torch's, needs the port free).
TEST(Launch, WithoutServeStoreRankZeroServesTheStore) {
  Finished env = run(launch({"--nproc_per_node=2", "--serve_store=false"}, {kProbe, "env"}));
  ASSERT_EQ(exit_code(env), 0) << env.err;
  EXPECT_EQ(env.out.find("DISTCOMM_STORE_SERVED_BY=launcher"), std::string::npos) << env.out;
  Finished f = run(launch({"--nproc_per_node=2", "--serve_store=false", "--backend=any_size"},
                          {runfile("tests/tools/launch/ordered_probe")}),
                   seconds(60), {"DISTCOMM_PLUGIN_PATH=" + runfile("tests/api/plugins")});
  ASSERT_EQ(exit_code(f), 0) << f.err;
  EXPECT_NE(f.out.find("[rank 1/2] hello from rank 1\n"), std::string::npos) << f.out;
}

// --on_failure=continue --replace_after_s: a failed rank's replacement starts after the
// delay with the same RANK, DISTCOMM_FT_JOIN=1 and its own member id, and when every rank's
// last process exits 0 the job has succeeded.
TEST(Launch, AFailedRanksReplacementJoinsAndTheJobSucceeds) {
  const auto started = std::chrono::steady_clock::now();
  Finished f = run(launch({"--nproc_per_node=3", "--on_failure=continue", "--replace_after_s=0.3"},
                          {kProbe, "replaced", "1", "7"}));
  EXPECT_EQ(exit_code(f), 0) << f.err;
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(300)) << "the replacement came before its delay";
  EXPECT_NE(f.err.find("launch: rank 1 (local rank 1, pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("failed: exit code 7; 2 ranks run on (--on_failure=continue); its replacement starts in"),
            std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find("started rank 1's replacement 1 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.out.find("[rank 1] replacement rank1+1 RANK=1"), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("every rank's last process exited 0 (failed ranks were replaced): the job succeeded"),
            std::string::npos)
      << f.err;
}

// A replacement that fails too leaves the job failed: the first failure is its exit code.
TEST(Launch, AReplacementThatFailsLeavesTheJobFailed) {
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue", "--replace_after_s=0"},
                          {kProbe, "replaced", "0", "7", "9"}));
  EXPECT_EQ(exit_code(f), 7) << f.err;
  EXPECT_NE(f.out.find("[rank 0] replacement rank0+1 RANK=0"), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("failed: exit code 9"), std::string::npos) << "the replacement's failure is said: " << f.err;
  EXPECT_EQ(f.err.find("the job succeeded"), std::string::npos) << f.err;
}

// A rank whose every process fails is replaced --max_replacements times, then no more: the
// job fails with the first failure's code instead of forking without end.
TEST(Launch, ReplacementsStopAtMaxReplacements) {
  std::remove((std::string(std::getenv("TEST_TMPDIR")) + "/replaced_1").c_str());  // an earlier test's success
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue", "--replace_after_s=0",
                           "--max_replacements=2"},
                          {kProbe, "replaced", "1", "7", "8"}));
  EXPECT_EQ(exit_code(f), 7) << f.err;
  EXPECT_NE(f.err.find("started rank 1's replacement 2 "), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("started rank 1's replacement 3 "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("not replaced again: rank 1 has had 2 replacements (--max_replacements=2)"), std::string::npos)
      << f.err;
}

// Without --replace_after_s a failed rank stays failed, and the job exits with its code.
TEST(Launch, OnFailureContinueWithoutReplacementsExitsWithTheFailure) {
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue"}, {kProbe, "replaced", "1", "7"}),
                   seconds(60));
  EXPECT_EQ(exit_code(f), 7) << f.err;
  EXPECT_EQ(f.out.find("replacement"), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("launch: the job failed: rank 1's last process: exit code 7 (not replaced: no --replace_after_s); "
                       "the first failure: rank 1 (local rank 1, pid "),
            std::string::npos)
      << "the job ends with a line that says so: " << f.err;
}

// The other ranks end before a failed rank's replacement is due: the job failed, and its
// last line says why rather than leaving the survivors' output last.
TEST(Launch, OthersEndingBeforeTheReplacementIsDueLeaveTheJobFailedAndSaySo) {
  std::remove((std::string(std::getenv("TEST_TMPDIR")) + "/replaced_1").c_str());  // an earlier test's success
  Finished f = run(launch({"--nproc_per_node=2", "--on_failure=continue", "--replace_after_s=30"},
                          {kProbe, "replaced", "1", "7"}),
                   seconds(60));
  EXPECT_EQ(exit_code(f), 7) << f.err;
  EXPECT_EQ(f.err.find("started rank 1's replacement"), std::string::npos) << f.err;
  const std::string closing =
      "launch: the job failed: rank 1's last process: exit code 7 (its replacement was not due before the other "
      "ranks ended); the first failure: rank 1 (local rank 1, pid ";
  const size_t at = f.err.find(closing);
  ASSERT_NE(at, std::string::npos) << f.err;
  EXPECT_EQ(f.err.find('\n', at), f.err.size() - 1) << "it is the launcher's last line: " << f.err;
}

TEST(Launch, HelpListsTheLaunchersFlagsOnly) {
  Finished f = run(launch({"--help"}, {}));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  for (const char* flag : {"--nproc_per_node=", "--nnodes=", "--master_addr=", "--log_dir=", "--version"}) {
    EXPECT_NE(f.out.find(flag), std::string::npos) << flag << " missing from:\n" << f.out;
  }
  // gflags' own flags (--flagfile, --helpfull, ...) are not the launcher's.
  EXPECT_EQ(f.out.find("--flagfile"), std::string::npos) << f.out;
  EXPECT_EQ(f.out.find("gflags"), std::string::npos) << f.out;
}

TEST(Launch, VersionIsDistcomms) {
  Finished f = run(launch({"--version"}, {}));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  EXPECT_EQ(f.out, std::string("launch (distcomm) ") + DISTCOMM_VERSION + "\n");
}

TEST(Launch, MissingProgramIsReportedBeforeAnythingStarts) {
  Finished f = run(launch({"--nproc_per_node=2"}, {"no_such_program_xyz"}));
  EXPECT_EQ(exit_code(f), 2);
  EXPECT_NE(f.err.find("'no_such_program_xyz' not found in $PATH"), std::string::npos) << f.err;
}

// A program path that does not exist is said so (helper-73: "is not an executable file").
TEST(Launch, AProgramPathThatDoesNotExistIsSaidSo) {
  Finished f = run(launch({"--nproc_per_node=1"}, {"./no_such_program_xyz"}));
  EXPECT_EQ(exit_code(f), 2);
  EXPECT_NE(f.err.find("'./no_such_program_xyz' does not exist"), std::string::npos) << f.err;
}

// The last line takes the first line of a rank's error, whole: one that introduced a list
// ended the job's summary at a dangling "Searched:" (helper-73).
TEST(Launch, TheLastLineEndsWithAWholeSentence) {
  Finished f = run(launch({"--nproc_per_node=1"}, {kProbe, "multiline_error"}));
  EXPECT_EQ(exit_code(f), 1) << f.err;
  const std::string last = f.err.substr(f.err.rfind('\n', f.err.size() - 2) + 1);
  EXPECT_TRUE(std::regex_match(last, std::regex(R"(launch: rank 0 \(local rank 0, pid \d+\) failed first \(exit code 1\): )"
                                                R"(cannot load backend 'x': no usable libdistcomm_x\.so\. )"
                                                R"(\(the rest in rank 0's output above\)\n)")))
      << last;
  EXPECT_NE(f.err.find("Searched:\n[rank 0]   /a/libdistcomm_x.so: not found"), std::string::npos) << f.err;
}

// A TMPDIR that does not exist (or a read-only /tmp) cost the job its ranks' error files
// without a word: the last line lost the rank's error, and the blame could go to the wrong
// rank. The launcher says so, and the folder goes to --log_dir instead.
TEST(Launch, AnErrorFolderTheTmpdirCannotTakeIsSaidAndMadeElsewhere) {
  const std::string logs = fresh_tmpdir("error_dir_logs");
  Finished f = run(launch({"--nproc_per_node=1", "--log_dir=" + logs, "--tee"}, {kProbe, "multiline_error"}),
                   seconds(60), {"TMPDIR=/nonexistent/x"});
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(launch: cannot make a folder for the ranks' error files in )"
                                                  R"(/nonexistent/x \(TMPDIR chooses it\): No such file or )"
                                                  R"(directory; using )" + logs + R"(/distcomm-launch-\S+ instead\n)")))
      << f.err;
  EXPECT_NE(f.err.find("failed first (exit code 1): cannot load backend 'x'"), std::string::npos)
      << "the rank's error file was read: " << f.err;
  EXPECT_EQ(entries_of(logs), std::vector<std::string>{"rank_0.log"}) << "the folder goes at the end";
}

// Each step between fork and execve says which it was: a working directory the rank cannot
// enter is not "could not run" the program.
TEST(Launch, AWorkingDirectoryTheRankCannotEnterIsNamed) {
  Finished f = run(launch({"--nproc_per_node=1"}, {kProbe, "env"}), seconds(60),
                   {"BUILD_WORKING_DIRECTORY=/nonexistent/wd"});
  EXPECT_NE(exit_code(f), 0) << f.err;
  EXPECT_NE(f.err.find("rank 0 cannot change into its working directory /nonexistent/wd: No such file or directory"),
            std::string::npos)
      << f.err;
}

// A /dev without null (a minimal container's): the launcher said "could not run './prog': No
// such file or directory" of a program that was there. Run in a mount namespace of its own,
// with an empty tmpfs over /dev.
TEST(Launch, ADevNullThatCannotBeOpenedIsNamed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to mount a /dev without null in a private mount namespace";
  if (!on_path("unshare") || !on_path("mount")) GTEST_SKIP() << "needs unshare(1) and mount(8)";
  const Finished probe = run({"unshare", "-m", "true"});
  if (exit_code(probe) != 0) GTEST_SKIP() << "cannot make a mount namespace here: " << probe.err;
  std::string command = "mount --make-rprivate / && mount -t tmpfs none /dev && exec";
  for (const std::string& arg : launch({"--nproc_per_node=1"}, {kProbe, "env"})) command += " '" + arg + "'";
  Finished f = run({"unshare", "-m", "sh", "-c", command});
  EXPECT_NE(exit_code(f), 0) << f.err;
  EXPECT_NE(f.err.find("cannot open /dev/null for rank 0's standard input: No such file or directory"),
            std::string::npos)
      << f.err;
  EXPECT_EQ(f.err.find("could not run"), std::string::npos) << f.err;
}

TEST(Launch, BadFlagsAreRefusedWithTheirName) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--nproc_per_node=0"}, "--nproc_per_node=0: must be at least 1"},
           {{"--nnodes=2", "--node_rank=2", "--master_port=1234"}, "--node_rank=2: must be in [0, 2)"},
           {{"--nnodes=2"}, "--master_port=0: with --nnodes > 1"},
           {{"--ranks_filter=0,x"}, "'x' is not a rank"},
           {{"--nproc_per_node=2", "--ranks_filter=2"}, "--ranks_filter=2: no such rank in a world of 2"},
           {{"--tee"}, "--tee=true: tee copies output to --log_dir"},
           {{"--max_restarts=-1"}, "--max_restarts=-1: must be >= 0"},
           {{"--nnodes=2", "--master_port=1234", "--max_restarts=1"}, "--max_restarts=1: with --nnodes=2 the launchers"},
           {{"--on_failure=maybe"}, "--on_failure=maybe: expected stop"},
           {{"--on_failure=continue", "--max_restarts=1"}, "--on_failure=continue: with --max_restarts=1"},
           {{"--replace_after_s=1"}, "--replace_after_s=1.000000: a replacement joins ranks that go on"},
           {{"--standalone", "--nnodes=2", "--master_port=1234"},
            "--standalone runs the job on this machine alone, at a free port on 127.0.0.1; --nnodes=2 places it "
            "elsewhere: drop one of the two"},
           {{"--standalone", "--master_addr=10.0.0.1"}, "--master_addr=10.0.0.1 places it elsewhere"},
           {{"--standalone", "--rdzv_endpoint=10.0.0.1:29400"}, "--rdzv_endpoint=10.0.0.1:29400 places it elsewhere"},
           // torchrun's spellings: what is taken is checked as the launcher's own flags are.
           {{"--nproc_per_node=many"}, "--nproc_per_node=many: expected a number of ranks, or cpu, gpu or auto"},
           {{"--rdzv_backend=etcd"}, "--rdzv_backend=etcd: the launchers meet through their own store"},
           {{"--rdzv_backend=c10d"}, "--rdzv_backend=c10d: give every launcher the same --rdzv_endpoint"},
           {{"--grace_period_s=inf"}, "--grace_period_s=inf: expected a number of seconds in [0, 1e9]"},
           {{"--on_failure=continue", "--replace_after_s=nan"}, "--replace_after_s=nan: expected a number of seconds"},
           {{"--log_dir"}, "--log_dir needs a value: --log_dir=VALUE"},
           {{"--bogus"}, "launch: unknown flag --bogus"},
           {{"-m", "trainer"}, "unknown flag -m: torchrun's -m runs a Python module or file"},
           {{"--redirects=3"}, "torchrun's --redirects sends the ranks' output to files: here --log_dir=DIR"},
       }) {
    Finished f = run(launch(c.flags, {kProbe, "env"}));
    EXPECT_EQ(exit_code(f), 2) << c.message;
    EXPECT_NE(f.err.find(c.message), std::string::npos) << f.err;
    EXPECT_EQ(f.out, "") << "nothing may start: " << c.message;
  }
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
