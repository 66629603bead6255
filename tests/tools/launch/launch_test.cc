// The launcher binary end to end: real processes, real pipes, real signals. Here the ranks'
// environment and descriptors, their output, the job's store, error folders and the
// launcher's own flags; a job that fails or is stopped (the cause named, the others stopped,
// --on_failure=continue's replacements) is launch_failures_test.cc's.
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

using std::chrono::seconds;

const std::string kProbe = rank_probe_path();

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

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

// A launcher run with a small stack (ulimit -s 64; the ranks and the other tools run with
// 32 KiB) ran its job, not a segfault (rc 139) that left its folder in TMPDIR behind: the
// main thread read the ranks' pipes into a 64 KiB buffer on its stack.
TEST(Launch, RunsWithA64KiBStack) {
  const std::string tmp = fresh_tmpdir("small_stack");
  const std::string script = "ulimit -s 64 && exec \"$0\" --nproc_per_node=2 -- \"$1\" env";
  Finished f = run({"/bin/sh", "-c", script, launcher_path(), kProbe}, seconds(60), {"TMPDIR=" + tmp});
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(shell_exit_code(f), 0) << f.err;
  EXPECT_EQ(std::count(f.out.begin(), f.out.end(), '\n'), 2) << f.out;
  EXPECT_TRUE(entries_of(tmp).empty()) << "left in TMPDIR: " << entries_of(tmp).front();
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
  // Node 1's launcher first checks its shape against node 0's (through node 0's store):
  // node 0's launcher runs, its ranks waiting, until node 1's is done.
  const int port = local::pick_free_port();
  const std::vector<std::string> env = {"DISTCOMM_RUN_ID=three_nodes", "DISTCOMM_STORE_TOKEN=secret"};
  auto node = [&](int n, const std::string& mode) {
    return launch({"--nproc_per_node=2", "--nnodes=3", "--node_rank=" + std::to_string(n), "--master_addr=127.0.0.1",
                   "--master_port=" + std::to_string(port)},
                  {kProbe, mode});
  };
  Subprocess node0(node(0, "wait"), env);
  std::vector<std::string> env1 = env;
  env1.push_back("OMPI_COMM_WORLD_RANK=7");
  Finished f = run(node(1, "env"), seconds(60), env1);
  node0.send_signal(SIGTERM);
  node0.finish(seconds(30));
  ASSERT_EQ(exit_code(f), 0) << f.err;
  std::string out = f.out;
  EXPECT_NE(out.find("[rank 2] RANK=2 WORLD_SIZE=6 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "
                     "MASTER_PORT=" + std::to_string(port) + " DISTCOMM_BACKEND=<unset> OMPI_COMM_WORLD_RANK=<unset>"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[rank 3] RANK=3 WORLD_SIZE=6 LOCAL_RANK=1"), std::string::npos) << out;
  // Node 0's launcher serves the store: the ranks of every machine are told so.
  EXPECT_NE(out.find(" DISTCOMM_STORE_SERVED_BY=launcher "), std::string::npos) << out;
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
  // stderr ends with the launcher's own last line (launch/job_outcome.h), after every rank's.
  std::vector<std::string> err_lines = lines_of(f.err);
  ASSERT_FALSE(err_lines.empty());
  EXPECT_EQ(err_lines.back().rfind("launch: the job succeeded: ranks 0-3 of 4 exited 0 after ", 0), 0u)
      << err_lines.back();
  err_lines.pop_back();
  for (const std::vector<std::string>& stream : {lines_of(f.out), err_lines}) {
    std::map<int, int> next_line;  // per rank: lines arrive whole and in order
    std::regex line(R"(\[rank (\d)\] rank (\d) line (\d+) (x+))");
    for (const std::string& l : stream) {
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

// A TMPDIR that does not exist (or a read-only /tmp) cost the job its ranks' error files
// without a word: the last line lost the rank's error, and the blame could go to the wrong
// rank. The launcher says so, and the folder goes to --log_dir instead.
TEST(Launch, AnErrorFolderTheTmpdirCannotTakeIsSaidAndMadeElsewhere) {
  const std::string logs = fresh_tmpdir("error_dir_logs");
  Finished f = run(launch({"--nproc_per_node=1", "--log_dir=" + logs, "--tee"}, {kProbe, "multiline_error"}),
                   seconds(60), {"TMPDIR=/nonexistent/x"});
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(launch: cannot make a folder for the ranks' error files in )"
                                                  R"(/nonexistent/x \(\$TMPDIR, or /tmp where it is unset\): No such file or )"
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
