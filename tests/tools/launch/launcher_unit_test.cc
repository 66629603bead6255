// The launcher library's pieces that need no process: options, environment, line cutting.
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "launch/dump_request.h"
#include "launch/elastic_options.h"
#include "launch/error_dir.h"
#include "launch/job.h"
#include "launch/job_store.h"
#include "launch/launch_options.h"
#include "launch/output_pump.h"
#include "launch/rank_environment.h"
#include "launch/rank_process.h"

namespace distcomm {
namespace launch {
namespace {

std::vector<std::string> split(LineSplitter& s, const std::vector<std::string>& chunks) {
  std::vector<std::string> lines;
  auto emit = [&](std::string_view l) { lines.emplace_back(l); };
  for (const std::string& c : chunks) s.feed(c.data(), c.size(), emit);
  s.finish(emit);
  return lines;
}

// The launcher's descriptors: its own per local rank, and, where it serves the job's store
// (node 0 only), one connection per rank of the whole job. Before: every machine's launcher
// counted one store connection per local rank (node 0 too few, the others too many).
TEST(DescriptorLimit, OnlyNode0CountsTheStoreAndItCountsTheWholeJob) {
  LaunchOptions o;
  o.command = {"/bin/true"};
  o.nproc_per_node = 8;
  o.nnodes = 4;
  o.serve_store = [](const JobStoreRequest&) -> std::unique_ptr<JobStore> { return nullptr; };
  o.node_rank = 0;
  EXPECT_EQ(descriptors_per_rank(o), 3);
  EXPECT_EQ(store_connections(o), 32);
  EXPECT_EQ(descriptors_needed(o, 10), 10 + 32 + 3 * 8 + 32);
  o.node_rank = 1;
  EXPECT_EQ(store_connections(o), 0);
  EXPECT_EQ(descriptors_needed(o, 10), 10 + 32 + 3 * 8);
  o.log_dir = "/tmp";
  EXPECT_EQ(descriptors_per_rank(o), 4);
  // Elastic rounds: the world size the rendezvous gave; their launchers serve no store.
  o.node_rank = 0;
  o.total_ranks = 20;
  EXPECT_EQ(store_connections(o), 20);
  o.serve_store = nullptr;
  EXPECT_EQ(store_connections(o), 0);
}

// A soft limit too low, a hard one high enough: the job runs (the launcher raises its soft
// limit); a hard limit too low: refused with the numbers.
TEST(DescriptorLimit, ALowSoftLimitIsNoRefusalOnlyALowHardOne) {
  LaunchOptions o;
  o.command = {"/bin/true"};
  o.nproc_per_node = 100;
  const long long needed = descriptors_needed(o, 0);
  EXPECT_GE(check_descriptor_limit(o, 64, 100000), needed);
  EXPECT_EQ(check_descriptor_limit(o, 64, -1), check_descriptor_limit(o, 64, 100000));
  try {
    check_descriptor_limit(o, 64, 128);
    ADD_FAILURE() << "a hard limit of 128 for 100 ranks was taken";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--nproc_per_node=100: "), std::string::npos) << what;
    EXPECT_NE(what.find("hard limit (RLIMIT_NOFILE, ulimit -Hn) is 128 (soft 64)"), std::string::npos) << what;
  }
}

TEST(LineSplitter, JoinsPiecesAndSplitsChunks) {
  LineSplitter s;
  EXPECT_EQ(split(s, {"he", "llo\nwor", "ld\n\nlast", " words"}),
            (std::vector<std::string>{"hello", "world", "", "last words"}));
}

TEST(LineSplitter, CutsALineThatNeverEnds) {
  LineSplitter s(/*max_line=*/4);
  EXPECT_EQ(split(s, {"abcdefghij", "\n"}), (std::vector<std::string>{"abcd", "efgh", "ij"}));
  // A line that arrives whole is never cut.
  EXPECT_EQ(split(s, {"abcdefghij\n"}), (std::vector<std::string>{"abcdefghij"}));
}

// A reader that does not read: write() never blocks, full() says to stop reading the ranks,
// the wake fd says when the reader has caught up, and the destructor writes out the rest.
TEST(TerminalWriter, QueuesWhileTheReaderIsBehindAndWritesEverythingOut) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const std::string line(999, 'x');
  std::string got;
  auto read_some = [&] {
    char buf[65536];
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof(buf));
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    return n;
  };
  std::thread reader;
  {
    TerminalWriter writer(pipe_fds[1], /*capacity=*/100'000);
    for (int i = 0; i < 300; ++i) writer.write(line + "\n");  // 300 kB: more than the pipe and the capacity
    EXPECT_TRUE(writer.full());
    // The writer's thread fills the pipe while the lines are queued, and may drop below the
    // capacity for a moment while they still are (a wake that is right when it is sent). Once
    // the pipe holds all it can, the thread waits in write(): from then on only reading can
    // wake the poll. A pipe holds less than its size in 1000-byte lines (whole lines per
    // page), so "full" is: more than half of it, unchanged for 100 ms.
    const int pipe_size = ::fcntl(pipe_fds[0], F_GETPIPE_SZ);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int in_pipe = -1, steady_ms = 0;
    while (steady_ms < 100 && std::chrono::steady_clock::now() < deadline) {
      int now = 0;
      ASSERT_EQ(::ioctl(pipe_fds[0], FIONREAD, &now), 0);
      steady_ms = (now == in_pipe && now > pipe_size / 2) ? steady_ms + 1 : 0;
      in_pipe = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Not ASSERT: leaving this scope waits for every line to be read (the destructor).
    EXPECT_EQ(steady_ms, 100) << "the writer's thread never filled the pipe: " << in_pipe << " of "
                              << pipe_size << " bytes";
    writer.clear_wake();
    pollfd wake{writer.wake_fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&wake, 1, 0), 0) << "the reader has not caught up";
    while (writer.full()) ASSERT_GT(read_some(), 0);
    EXPECT_EQ(::poll(&wake, 1, 5000), 1) << "the wake fd says the reader caught up";
    writer.clear_wake();
    EXPECT_EQ(::poll(&wake, 1, 0), 0);
    // The rest is read while the destructor waits for it to be written.
    reader = std::thread([&] {
      while (read_some() > 0) {
      }
    });
  }
  ::close(pipe_fds[1]);
  reader.join();
  std::string all;
  for (int i = 0; i < 300; ++i) all += line + "\n";
  EXPECT_EQ(got, all);
  ::close(pipe_fds[0]);
}

TEST(RankList, ParsesCommaListsAndRefusesTheRest) {
  EXPECT_EQ(parse_rank_list(""), std::set<int>{});
  EXPECT_EQ(parse_rank_list("3,0,3"), (std::set<int>{0, 3}));
  EXPECT_EQ(parse_rank_list("0, 2"), (std::set<int>{0, 2}));
  for (const char* bad : {"a", "1,", ",1", "-1", "1;2", "1 2"}) {
    EXPECT_THROW(parse_rank_list(bad), std::invalid_argument) << bad;
  }
}

LaunchOptions valid() {
  LaunchOptions o;
  o.command = {"/bin/true"};
  o.nproc_per_node = 2;
  return o;
}

TEST(Validate, NamesTheFlagThatIsWrong) {
  auto message = [](LaunchOptions o) {
    try {
      validate(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(valid()), "accepted");
  LaunchOptions o = valid();
  o.command.clear();
  EXPECT_NE(message(o).find("no program to run"), std::string::npos);
  o = valid();
  o.master_port = 70000;
  EXPECT_NE(message(o).find("--master_port=70000"), std::string::npos);
  o = valid();
  o.nnodes = 2;
  o.node_rank = -1;
  EXPECT_NE(message(o).find("--node_rank=-1"), std::string::npos);
  o = valid();
  o.master_addr = "";
  EXPECT_NE(message(o).find("--master_addr"), std::string::npos);
}

std::string get(const std::vector<std::string>& env, const std::string& name) {
  std::string value = "<unset>";
  for (const std::string& e : env) {
    if (e.rfind(name + "=", 0) == 0) {
      EXPECT_EQ(value, "<unset>") << name << " is set twice";
      value = e.substr(name.size() + 1);
    }
  }
  return value;
}

TEST(RankEnvironment, PlacesTheRankInTheWholeJobAndOverridesStaleValues) {
  LaunchOptions o = valid();
  o.nproc_per_node = 4;
  o.nnodes = 2;
  o.node_rank = 1;
  o.master_addr = "head";
  o.backend = "mpi";
  const char* base[] = {"PATH=/bin", "RANK=99", "OMPI_COMM_WORLD_RANK=5", "SLURM_PROCID=5", nullptr};
  std::vector<std::string> env = rank_environment(o, /*local_rank=*/3, /*master_port=*/1234, base);
  EXPECT_EQ(get(env, "RANK"), "7");
  EXPECT_EQ(get(env, "WORLD_SIZE"), "8");
  EXPECT_EQ(get(env, "LOCAL_RANK"), "3");
  EXPECT_EQ(get(env, "LOCAL_WORLD_SIZE"), "4");
  EXPECT_EQ(get(env, "MASTER_ADDR"), "head");
  EXPECT_EQ(get(env, "MASTER_PORT"), "1234");
  EXPECT_EQ(get(env, "DISTCOMM_BACKEND"), "mpi");
  EXPECT_EQ(get(env, "PATH"), "/bin");
  EXPECT_EQ(get(env, "OMPI_COMM_WORLD_RANK"), "<unset>");
  EXPECT_EQ(get(env, "SLURM_PROCID"), "<unset>");
}

// Who serves the store is the launcher's to say: an outer job's answer never passes through.
TEST(RankEnvironment, SaysTheLauncherServesTheStoreOnlyWhenItDoes) {
  LaunchOptions o = valid();
  const char* base[] = {"DISTCOMM_STORE_SERVED_BY=launcher", nullptr};
  EXPECT_EQ(get(rank_environment(o, 0, 1234, base), "DISTCOMM_STORE_SERVED_BY"), "<unset>")
      << "without serve_store rank 0 serves it";
  o.serve_store = [](const JobStoreRequest&) -> std::unique_ptr<JobStore> { return nullptr; };
  const char* stale[] = {"DISTCOMM_STORE_SERVED_BY=other", nullptr};
  EXPECT_EQ(get(rank_environment(o, 0, 1234, stale), "DISTCOMM_STORE_SERVED_BY"), "launcher");
}

TEST(ElasticOptions, NnodesIsANumberOrARange) {
  EXPECT_EQ(parse_nnodes("4"), std::make_pair(4, 4));
  EXPECT_EQ(parse_nnodes("1:3"), std::make_pair(1, 3));
  EXPECT_EQ(parse_nnodes("2:2"), std::make_pair(2, 2));
  for (const char* bad : {"", "3:2", "0", ":3", "1:", "a:b", "1:2:3", "-1:2"}) {
    EXPECT_THROW(parse_nnodes(bad), std::invalid_argument) << bad;
  }
}

TEST(ElasticOptions, EndpointsWithAndWithoutPort) {
  ElasticOptions o;
  parse_endpoint("node0.example.com:29500", &o);
  EXPECT_EQ(o.endpoint_host, "node0.example.com");
  EXPECT_EQ(o.endpoint_port, 29500);
  parse_endpoint("node0", &o);
  EXPECT_EQ(o.endpoint_port, kDefaultRendezvousPort);
  parse_endpoint("[::1]:1234", &o);
  EXPECT_EQ(o.endpoint_host, "::1");
  EXPECT_EQ(o.endpoint_port, 1234);
  for (const char* bad : {"", ":29500", "host:0", "host:70000", "host:x", "::1:5", "[::1"}) {
    EXPECT_THROW(parse_endpoint(bad, &o), std::invalid_argument) << bad;
  }
}

TEST(AttemptOptions, ARestartedAttemptKeepsTheFailedOnesFiles) {
  LaunchOptions job;
  job.log_dir = "/logs";
  job.trace_dir = "/traces";
  job.timeline = "/out/run.v1/timeline.json";
  LaunchOptions first = attempt_options(job, 0);
  EXPECT_EQ(first.log_dir, "/logs");
  EXPECT_EQ(first.timeline, "/out/run.v1/timeline.json");
  LaunchOptions third = attempt_options(job, 2);
  EXPECT_EQ(third.restart_count, 2);
  EXPECT_EQ(third.log_dir, "/logs/attempt_2");
  EXPECT_EQ(third.trace_dir, "/traces/attempt_2");
  EXPECT_EQ(third.timeline, "/out/run.v1/timeline.attempt_2.json");
  job.timeline = "/out/run.v1/timeline";
  EXPECT_EQ(attempt_options(job, 1).timeline, "/out/run.v1/timeline.attempt_1");
}


// A folder of this test's own under TEST_TMPDIR.
std::string test_folder(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

// A rank cut off by a peer's failure writes its dump as it exits, and may do so just before
// the launcher, seeing the peer's exit, asks it for one: that dump is this attempt's, and the
// rank is not said to have left none ("no trace dump from rank(s) 0" with rank_0.json there).
TEST(DumpRequest, ARankThatDumpedOnItsOwnJustBeforeTheAskAndExitedLeftADump) {
  const std::string dir = test_folder("dumps");
  ::signal(SIGUSR1, [](int) {});  // this process stands for the ranks: it handles the ask
  DumpRequest dumps;
  dumps.attempt_began();
  std::ofstream(dir + "/rank_0.json") << "{}";
  // Past the file clock's slack: the dump is older than the ask.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  dumps.ask(dir, {{0, ::getpid()}, {1, ::getpid()}}, std::chrono::seconds(5));
  ASSERT_TRUE(dumps.pending());
  EXPECT_TRUE(dumps.finished([](int) { return false; }));  // both exited
  EXPECT_EQ(dumps.missing(), std::vector<int>{1}) << "rank 0 left rank_0.json; rank 1 left nothing";
  ::signal(SIGUSR1, SIG_DFL);
}

// A rank still running is awaited for the dump it was asked for, an older one of its own
// notwithstanding.
TEST(DumpRequest, ARunningRankIsAwaitedForTheDumpItWasAskedFor) {
  const std::string dir = test_folder("dumps_running");
  ::signal(SIGUSR1, [](int) {});
  DumpRequest dumps;
  dumps.attempt_began();
  std::ofstream(dir + "/rank_0.json") << "{}";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  dumps.ask(dir, {{0, ::getpid()}}, std::chrono::seconds(5));
  EXPECT_FALSE(dumps.finished([](int) { return true; }));
  std::ofstream(dir + "/rank_0.json") << "{\"fresh\":1}";
  EXPECT_TRUE(dumps.finished([](int) { return true; }));
  EXPECT_TRUE(dumps.missing().empty());
  ::signal(SIGUSR1, SIG_DFL);
}

// A TMPDIR that cannot take the error files' folder is said, with why, and the folder goes
// to the next place that takes it; where none does, the line says what that costs.
TEST(ErrorDir, ATmpdirThatCannotTakeTheFolderIsSaidAndTheNextPlaceTakesIt) {
  const std::string fallback = test_folder("error_dir_fallback");
  std::string warning;
  const std::string dir = make_error_dir("/nonexistent/x", {"", fallback}, &warning);
  ASSERT_EQ(dir.rfind(fallback + "/distcomm-launch-", 0), 0u) << dir;
  EXPECT_EQ(warning, "cannot make a folder for the ranks' error files in /nonexistent/x ($TMPDIR, or /tmp where it is unset): "
                     "No such file or directory; using " + dir + " instead");
  ::rmdir(dir.c_str());
  warning.clear();
  EXPECT_EQ(make_error_dir("/nonexistent/x", {"/nonexistent/y"}, &warning), "");
  EXPECT_EQ(warning, "cannot make a folder for the ranks' error files in /nonexistent/x ($TMPDIR, or /tmp where it is unset): "
                     "No such file or directory; nor in /nonexistent/y; the ranks report no error, so the first "
                     "rank seen to fail is named as the cause");
  warning.clear();
  const std::string fine = make_error_dir(fallback, {"/nonexistent/y"}, &warning);
  EXPECT_EQ(warning, "") << "nothing to say when TMPDIR takes it";
  ::rmdir(fine.c_str());
}

}  // namespace
}  // namespace launch
}  // namespace distcomm
