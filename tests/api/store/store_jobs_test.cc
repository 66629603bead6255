// Whole jobs and their store: two jobs on one port, a job under attack, the store that
// outlives rank 0 where a launcher serves it, and the identity that tools/launch, spawn()
// and init_process_group pass along.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/init.h"
#include "api/process/spawn.h"
#include "api/process/job_identity.h"
#include "api/store/file_store.h"
#include "tests/api/store/hand_started_job.h"
#include "tests/api/store/store_survivors.h"
#include "tests/api/store/store_test_util.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/subprocess.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using namespace testing;

constexpr size_t kMiB = size_t{1} << 20;

std::vector<std::string> job(int port, const std::string& gate, int rounds_after_gate = 20) {
  return {runfile("tools/launch/launch"), "--nproc_per_node=3", "--backend=gloo",
          "--master_port=" + std::to_string(port), "--",
          runfile("tests/api/store/store_job_probe"), gate, std::to_string(rounds_after_gate)};
}

std::vector<std::string> with_identity(const JobIdentity& id) {
  return {std::string(kRunIdVariable) + "=" + id.run_id, std::string(kStoreTokenVariable) + "=" + id.token};
}

void open_gate(const std::string& gate) { std::ofstream(gate) << "open"; }

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Jobs, ASecondJobOnTheSamePortFailsFastAndTheFirstCompletes) {
  const int port = unused_port();
  const std::string gate = temp_path("gate");
  const JobIdentity first_id = new_job_identity(), second_id = new_job_identity();
  Subprocess first(job(port, gate), with_identity(first_id));
  ASSERT_TRUE(first.wait_for_stdout("ready", 3, 30s));

  // Its launcher, which serves the job's store, cannot take the port, and says so in one
  // line before any rank starts.
  const auto second_started = Clock::now();
  Finished second = run(job(port, gate), 30s, with_identity(second_id));
  EXPECT_LT(Clock::now() - second_started, kAtOnce);
  EXPECT_EQ(exit_code(second), 1) << second.out << second.err;
  EXPECT_NE(second.err.find("launch: cannot start the job: TCPStoreServer: cannot listen on 127.0.0.1:" +
                            std::to_string(port) + ": Address already in use; another job (or another program) is "
                            "using port " + std::to_string(port)),
            std::string::npos)
      << second.err;
  EXPECT_EQ(second.out, "") << "a rank of the second job started";

  // Stray ranks started by hand towards the running job: another job's, and one with no
  // identity at all. Neither joins; each is told whose store it reached.
  const std::vector<std::string> stray_env = {"RANK=1", "WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1",
                                              "MASTER_PORT=" + std::to_string(port), "DISTCOMM_BACKEND=gloo"};
  for (const std::string& ours : {"run id " + second_id.run_id, std::string("no run id")}) {
    std::vector<std::string> env = stray_env;
    if (ours != "no run id") {
      for (const auto& v : with_identity(second_id)) env.push_back(v);
    } else {
      env.push_back(std::string(kRunIdVariable) + "=");
      env.push_back(std::string(kStoreTokenVariable) + "=");
    }
    Finished stray = run({runfile("tests/api/store/store_job_probe"), gate, "1"}, 30s, env);
    EXPECT_EQ(exit_code(stray), 1) << stray.err;
    EXPECT_NE(stray.err.find("the store at 127.0.0.1:" + std::to_string(port) + " belongs to another job (run id " +
                             first_id.run_id + "; this rank has " + ours + ")"),
              std::string::npos)
        << stray.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(stray.err, m, std::regex(R"(error after (\d+) ms: )"))) << stray.err;
    EXPECT_LT(std::stoi(m[1]), 1000) << stray.err;
  }

  open_gate(gate);
  Finished done = first.finish(60s);
  EXPECT_EQ(exit_code(done), 0) << done.err;
  EXPECT_EQ(count_of(done.out, "] done "), 3) << done.out << done.err;
  // The first job's store (its launcher's) says once that it turned a stranger away.
  EXPECT_NE(done.err.find(": it belongs to another job (run id " + second_id.run_id + ")"), std::string::npos)
      << done.err;
  for (int r = 0; r < 3; ++r) std::remove((gate + ".pid" + std::to_string(r)).c_str());
  std::remove(gate.c_str());
}

// A field of /proc/<pid>/status in KiB ("VmRSS", "VmHWM"), -1 when unreadable.
long status_kib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// The header of a SET whose value of `bytes` bytes would follow.
std::string set_header(const std::string& key, uint32_t bytes) {
  return std::string(1, kSet) + u32(2) + u32(static_cast<uint32_t>(key.size())) + key + u32(bytes);
}

// The store's host is the job's launcher, which serves it: its memory stays bounded.
TEST(Jobs, AJobUnderAttackCompletesAndTheStoresHostStaysSmall) {
  const int port = unused_port();
  const std::string gate = temp_path("gate");
  const JobIdentity id = new_job_identity();  // the attackers know the token: the worst case
  Subprocess victim(job(port, gate), with_identity(id));
  ASSERT_TRUE(victim.wait_for_stdout("ready", 3, 30s));
  // From here the ranks run rounds (an all_reduce and a store add each) until the gate.
  const pid_t host = victim.pid();
  const long baseline = status_kib(host, "VmRSS");
  ASSERT_GT(baseline, 0);
  // The peak from now on: the kernel's high-water mark, reset here, and samples in case
  // the reset is refused.
  bool hwm_reset = false;
  {
    std::ofstream clear("/proc/" + std::to_string(host) + "/clear_refs");
    hwm_reset = static_cast<bool>(clear << "5" << std::flush);
  }
  std::atomic<bool> stop{false};
  std::atomic<long> sampled{baseline};
  std::thread sampler([&] {
    while (!stop) {
      const long v = status_kib(host, "VmRSS");
      if (v > sampled) sampled = v;
      std::this_thread::sleep_for(2ms);
    }
  });

  // 200 connections that never say a word (a port scanner, a slowloris).
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(std::make_unique<RawClient>(port));
  // 4 clients with the token announcing 250 MiB SETs: refused at the header.
  for (int i = 0; i < 4; ++i) {
    RawClient huge(port);
    huge.handshake(id);
    huge.send_bytes(set_header("huge", 250u << 20));
    EXPECT_TRUE(huge.hung_up(5s)) << i;
  }
  // 4 clients with the token streaming the largest SET the store takes, never finishing.
  constexpr uint32_t kValueBytes = (64u << 20) - 4096;
  std::vector<std::unique_ptr<RawClient>> hogs;
  std::vector<size_t> left;  // each stops one byte short of its value
  for (int i = 0; i < 4; ++i) {
    hogs.push_back(std::make_unique<RawClient>(port));
    hogs.back()->handshake(id);
    hogs.back()->send_bytes(set_header("hog" + std::to_string(i), kValueBytes));
    left.push_back(kValueBytes - 1);
  }
  const std::string chunk(kMiB, 'x');
  size_t streamed = 0;
  auto last_progress = Clock::now();
  const auto give_up = Clock::now() + 20s;
  while (Clock::now() - last_progress < 500ms && Clock::now() < give_up) {
    for (size_t i = 0; i < hogs.size(); ++i) {
      const size_t n = hogs[i]->send_bytes(chunk.substr(0, std::min(chunk.size(), left[i])));
      if (n > 0) last_progress = Clock::now();
      left[i] -= n;
      streamed += n;
    }
    std::this_thread::sleep_for(1ms);
  }
  for (auto& hog : hogs) EXPECT_FALSE(hog->hung_up(0ms)) << "an unfinished SET within the limits is not an error";
  // The store is still the job's: its rounds go on under all this.
  std::this_thread::sleep_for(300ms);
  long peak = sampled;
  if (hwm_reset) peak = std::max(peak, status_kib(host, "VmHWM"));

  open_gate(gate);
  Finished done = victim.finish(60s);
  stop = true;
  sampler.join();
  EXPECT_EQ(exit_code(done), 0) << done.err;
  EXPECT_EQ(count_of(done.out, "] done "), 3) << done.out << done.err;
  // The attack was real: one hog had the whole budget's worth accepted.
  EXPECT_GE(streamed, 64 * kMiB);
  std::cout << "the launcher's RSS " << baseline / 1024 << " MiB before, peak " << peak / 1024 << " MiB ("
            << (hwm_reset ? "VmHWM" : "sampled VmRSS") << "); " << streamed / kMiB
            << " MiB streamed by the hogs\n";
  EXPECT_LT(peak - baseline, 100 * 1024) << "KiB of growth";
  for (int r = 0; r < 3; ++r) std::remove((gate + ".pid" + std::to_string(r)).c_str());
  std::remove(gate.c_str());
}

// Whether a host name resolves to a loopback address here.
bool resolves_to_loopback(const std::string& name) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0) return false;
  bool loopback = true;
  for (const addrinfo* a = res; a; a = a->ai_next) {
    loopback &= a->ai_family == AF_INET
                    ? (ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127
                    : IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
  }
  freeaddrinfo(res);
  return loopback;
}

TEST(Jobs, StartedByHandWithoutATokenItWorksAndRankZeroWarnsOnce) {
  const int port = unused_port();
  const std::string gate = temp_path("gate");
  open_gate(gate);
  // MASTER_ADDR as the host's name, as scripts often set it.
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{runfile("tests/api/store/store_job_probe"), gate, "5"},
        std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=2", std::string("MASTER_ADDR=") + host,
                                 "MASTER_PORT=" + std::to_string(port), "DISTCOMM_BACKEND=gloo",
                                 std::string(kRunIdVariable) + "=", std::string(kStoreTokenVariable) + "="}));
  }
  const Finished rank0 = ranks[0]->finish(60s), rank1 = ranks[1]->finish(60s);
  EXPECT_EQ(exit_code(rank0), 0) << rank0.err;
  EXPECT_EQ(exit_code(rank1), 0) << rank1.err;
  EXPECT_EQ(count_of(rank0.err, "has no token: any process that can connect to it can read and change this job's "
                                "keys"),
            1)
      << rank0.err;
  EXPECT_EQ(count_of(rank1.err, "has no token"), 0) << rank1.err;
  // A name that is loopback here (Debian maps the host's name to 127.0.1.1) would keep
  // other hosts out: rank 0 says so.
  EXPECT_EQ(count_of(rank0.err, "is a loopback address on this host: ranks on other hosts cannot reach it"),
            resolves_to_loopback(host) ? 1 : 0)
      << rank0.err;
  for (int r = 0; r < 2; ++r) std::remove((gate + ".pid" + std::to_string(r)).c_str());
  std::remove(gate.c_str());
}

std::vector<std::string> survivors_job(const std::vector<std::string>& launcher_flags, const std::string& mode) {
  std::vector<std::string> argv = {runfile("tools/launch/launch"), "--nproc_per_node=3"};
  argv.insert(argv.end(), launcher_flags.begin(), launcher_flags.end());
  argv.insert(argv.end(), {"--", runfile("tests/api/store/store_survivor_probe"), mode});
  return argv;
}

// tools/launch serves the store, so rank 0's death does not take it along: with
// --on_failure=continue, ranks 1 and 2 go on setting, adding and reading through the world
// group's store after rank 0 was SIGKILLed. (Served by rank 0, every store call of theirs
// failed.) The job still exits with the first failure's code.
TEST(Jobs, UnderTheLauncherTheSurvivorsOfRankZerosDeathKeepTheStore) {
  Finished f = run(survivors_job({"--on_failure=continue"}, "kill"), 90s);
  EXPECT_EQ(exit_code(f), 128 + SIGKILL) << f.out << f.err;
  EXPECT_NE(f.out.find("[rank 1] survived 1\n"), std::string::npos) << f.out << f.err;
  EXPECT_NE(f.out.find("[rank 2] survived 2\n"), std::string::npos) << f.out << f.err;
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(launch: rank 0 \(local rank 0, pid \d+\) failed: signal SIGKILL )"
                                                  R"(\(Killed\); \d ranks? runs? on \(--on_failure=continue\))")))
      << f.err;
  EXPECT_EQ(f.err.find("stopping"), std::string::npos) << "no rank is stopped: " << f.err;
}

// Rank 0 is a client of the launcher's store like every other rank: its program ending
// (cleanly) leaves the store to the others. (Served by rank 0, it went with rank 0.)
TEST(Jobs, UnderTheLauncherRankZeroLeavingLeavesTheStore) {
  Finished f = run(survivors_job({}, "exit"), 90s);
  EXPECT_EQ(exit_code(f), 0) << f.out << f.err;
  for (const char* line : {"[rank 0] rank 0 left\n", "[rank 1] survived 1\n", "[rank 2] survived 2\n"}) {
    EXPECT_NE(f.out.find(line), std::string::npos) << line << " missing: " << f.out << f.err;
  }
}

// spawn() serves its job's store in the calling process: rank 0's return (its forked process
// exits) leaves the store to the others.
TEST(Jobs, UnderSpawnRankZeroLeavingLeavesTheStore) {
  const std::string said = temp_path("spawn_survivors");
  SpawnOptions options;
  options.backend = "gloo";
  options.timeout = std::chrono::seconds(90);
  spawn(3,
        [&](int rank, int) {
          InitOptions init;
          init.timeout = 60s;
          ProcessGroupPtr pg = init_process_group(init);
          std::ofstream(said + std::to_string(rank)) << outlive_rank_zero(*pg, RankZeroLeaves::kExits);
        },
        options);  // throws when a survivor's store call failed
  const std::vector<std::string> expected = {"rank 0 left", "survived 1", "survived 2"};
  for (int r = 0; r < 3; ++r) {
    std::string line;
    std::getline(std::ifstream(said + std::to_string(r)), line);
    EXPECT_EQ(line, expected[static_cast<size_t>(r)]);
    std::remove((said + std::to_string(r)).c_str());
  }
}

// Started by hand, without a launcher to say it serves the store (an empty
// DISTCOMM_STORE_SERVED_BY is none), rank 0 serves it: the job starts, and rank 0's exit
// takes the store along.
TEST(Jobs, StartedByHandRankZeroServesTheStore) {
  const HandStartedJob job(3);
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(job.start(r, {runfile("tests/api/store/store_survivor_probe"), "exit"},
                              {"DISTCOMM_STORE_SERVED_BY=", "DISTCOMM_BACKEND=gloo"}));
  }
  const Finished rank0 = ranks[0]->finish(90s);
  EXPECT_EQ(exit_code(rank0), 0) << rank0.out;
  EXPECT_NE(rank0.out.find("rank 0 left"), std::string::npos) << "rank 0 served the store it joined: " << rank0.out;
  for (int r = 1; r < 3; ++r) {
    const Finished f = ranks[static_cast<size_t>(r)]->finish(90s);
    EXPECT_EQ(exit_code(f), 1) << f.out;
    EXPECT_EQ(f.out.find("survived"), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("TCPStore"), std::string::npos) << "the store went with rank 0: " << f.out;
  }
}

// Started by hand, one rank told another WORLD_SIZE: rank 0's store refuses it, and every
// rank ends at once saying why. (Before, the refused rank ended and the others waited out
// init's 30-minute timeout for it.)
TEST(Jobs, StartedByHandARankOfAnotherWorldSizeEndsEveryRankAtOnce) {
  const HandStartedJob job(3);
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> env = {"DISTCOMM_STORE_SERVED_BY=", "DISTCOMM_BACKEND=gloo"};
    if (r == 2) env.push_back("WORLD_SIZE=4");
    ranks.push_back(job.start(r, {runfile("tests/api/store/store_survivor_probe"), "exit"}, env));
  }
  const auto start = Clock::now();
  for (int r = 0; r < 3; ++r) {
    const Finished f = ranks[static_cast<size_t>(r)]->finish(90s);
    EXPECT_EQ(exit_code(f), 1) << f.out;
    EXPECT_NE(f.out.find("this store serves a job of 3 ranks, and the client at 127.0.0.1:"), std::string::npos)
        << f.out;
    EXPECT_NE(f.out.find(" says its job has 4: every rank needs the same WORLD_SIZE"), std::string::npos) << f.out;
    if (r == 2) {
      EXPECT_NE(f.out.find("refused this connection"), std::string::npos) << f.out;
    } else {
      EXPECT_NE(f.out.find("rank " + std::to_string(r) + "/3 group 'world': init stopped waiting for the other ranks"),
                std::string::npos)
          << f.out;
      EXPECT_NE(f.out.find("the job cannot run: "), std::string::npos) << f.out;
    }
  }
  EXPECT_LT(Clock::now() - start, 30s) << "the ranks of the right size waited for the refused one";
}

// Started by hand, two processes given the same RANK (WORLD_SIZE=3: ranks 0, 1 and 1 again;
// rank_probe's init, group timeout 3 s): the second rank 1 to claim its number is refused at
// once with an InvalidArgument naming both processes, and the others end with it too, well
// before their timeout. (Before, each rank 1 counted its own creation of 'world', the second
// as 'world@2', and every rank timed out waiting for ranks that were there: one rank 1 for
// [0, 2], the others for [2]; nothing said why.)
TEST(Jobs, StartedByHandTwoProcessesOfTheSameRankAreNamedAtOnce) {
  const HandStartedJob job(3);
  const std::vector<int> ranks_given = {0, 1, 1};
  std::vector<std::unique_ptr<Subprocess>> ranks;
  const auto start = Clock::now();
  for (int r : ranks_given) {
    ranks.push_back(job.start(r, {runfile("tests/api/store/rank_probe"), "init"}, {"DISTCOMM_STORE_SERVED_BY="}));
  }
  std::vector<Finished> done;
  for (auto& rank : ranks) done.push_back(rank->finish(60s));
  const auto took = Clock::now() - start;
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  const std::string host = name;
  int refused = 0;
  for (size_t i = 0; i < done.size(); ++i) {
    const Finished& f = done[i];
    std::fprintf(stderr, "--- process %zu (rank %d, pid %d, exit %d):\n%s", i, ranks_given[i],
                 static_cast<int>(ranks[i]->pid()), exit_code(f), f.out.c_str());
    EXPECT_EQ(exit_code(f), 1) << f.out;
    EXPECT_EQ(f.out.find("timed out"), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("rank 1 was started twice: by "), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("; every process needs its own RANK"), std::string::npos) << f.out;
    // Both rank 1 processes are named, as host:pid, whichever claimed the rank first.
    const std::string a = host + ":" + std::to_string(ranks[1]->pid()), b = host + ":" + std::to_string(ranks[2]->pid());
    EXPECT_TRUE(f.out.find("by " + a + " and " + b + ";") != std::string::npos ||
                f.out.find("by " + b + " and " + a + ";") != std::string::npos)
        << a << ", " << b << ": " << f.out;
    const std::string head = "rank " + std::to_string(ranks_given[i]) + " caught distcomm::";
    if (f.out.find(head + "InvalidArgument: rank 1/3 group 'world': rank 1 was started twice") != std::string::npos) {
      ++refused;
    } else {
      EXPECT_NE(f.out.find(head + "PeerFailure: rank " + std::to_string(ranks_given[i]) + "/3 group 'world': init gave up"),
                std::string::npos)
          << f.out;
    }
  }
  EXPECT_EQ(refused, 1) << "one of the two rank 1 processes is refused itself";
  // No rank waited for its timeout (3 s: none says "timed out"); how long they took, for the log.
  std::fprintf(stderr, "--- every process ended %lld ms after the first started\n",
               static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}

// A second process with a rank that arrives after the job's group was made (WORLD_SIZE=2,
// ranks 0 and 1 in their first op; then rank 1 again, group timeout 3 s) cannot be told from
// a replacement by the store alone, and waits for ranks that never come; but the process that
// holds its rank still runs on this host, so it says so at once, and its Timeout says it too.
TEST(Jobs, ASecondProcessOfARankAfterTheGroupWasMadeIsToldTheFirstStillRuns) {
  const HandStartedJob job(2);
  const std::string gate = temp_path("second_rank_gate");
  std::remove(gate.c_str());
  std::unique_ptr<Subprocess> rank0 = job.start(0, {runfile("tests/api/store/rank_probe"), "hang", gate});
  std::unique_ptr<Subprocess> rank1 = job.start(1, {runfile("tests/api/store/rank_probe"), "hang", gate});
  ASSERT_TRUE(rank0->wait_for_stdout("rank 0 waits in all_reduce #1", 1, 30s)) << rank0->finish(1s).out;
  std::unique_ptr<Subprocess> second = job.start(1, {runfile("tests/api/store/rank_probe"), "init"});
  const Finished f = second->finish(30s);
  open_gate(gate);
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  const std::string first = std::string(name) + ":" + std::to_string(rank1->pid());
  EXPECT_EQ(exit_code(f), 1) << f.out;
  const std::string said = "rank 1 of group 'world' is already held by process " + first +
                           ", which joined the group with every other rank and still runs: if it is still in the job, "
                           "this process is a second rank 1";
  EXPECT_NE(f.out.find("warning: " + said), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("init timed out"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("; " + said), std::string::npos) << "the Timeout says it too: " << f.out;
  EXPECT_LT(f.out.find("warning: "), f.out.find("init timed out")) << "said at once, before the wait: " << f.out;
  std::remove(gate.c_str());
}

// What the check of a rank started twice must let through: a process that makes its group
// again over the same store (destroy, then init), and a later job's processes over a store
// an earlier job left its keys in (a FileStore kept, without a run id), each claiming ranks
// another process held in a creation that is over.
TEST(Jobs, RanksClaimedInACreationThatIsOverAreTakenAgain) {
  const std::string path = temp_path("kept_file_store");
  std::remove(path.c_str());
  auto job = [&](int creations) {
    testing::run_ranks(2, [&](int r, int world) {
      auto store = std::make_shared<FileStore>(path);  // kept: no count of workers
      for (int i = 0; i < creations; ++i) {
        InitOptions o;
        o.backend = "gloo";
        o.store = store;
        o.rank = r;
        o.world_size = world;
        o.timeout = 20s;
        ProcessGroupPtr pg = init_process_group(o);
        EXPECT_EQ(pg->size(), 2);
        pg->barrier()->wait();
        pg.reset();
        destroy_process_group();
      }
    });
  };
  job(2);  // the same processes, twice
  job(1);  // new processes, over what the first job left
  std::remove(path.c_str());
}

// "id=<run id> token=<length>" from every rank of a launched job.
std::set<std::string> identities_seen(const std::vector<std::string>& env = {}) {
  Finished f = run({runfile("tools/launch/launch"), "--nproc_per_node=2", "--", "/bin/sh", "-c",
                    "echo id=$DISTCOMM_RUN_ID token=${#DISTCOMM_STORE_TOKEN}"},
                   30s, env);
  EXPECT_EQ(exit_code(f), 0) << f.err;
  std::set<std::string> seen;
  for (const std::string& line : lines_of(f.out)) seen.insert(line.substr(line.find("] ") + 2));
  return seen;
}

TEST(Identity, TheLauncherGivesEachJobItsOwnAndPassesOnAGivenOne) {
  const std::set<std::string> first = identities_seen(), second = identities_seen();
  ASSERT_EQ(first.size(), 1u) << "both ranks of a job have one identity";
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(*first.begin(), *second.begin()) << "two jobs, two identities";
  EXPECT_TRUE(std::regex_match(*first.begin(), std::regex("id=[0-9a-f]{16} token=64"))) << *first.begin();
  // Given to the launcher (several machines must share one): passed on as it is.
  const std::set<std::string> given = identities_seen({"DISTCOMM_RUN_ID=shared", "DISTCOMM_STORE_TOKEN=secret"});
  EXPECT_EQ(given, std::set<std::string>{"id=shared token=6"});
  // Only a run id given: the token is still made for the job.
  EXPECT_EQ(identities_seen({"DISTCOMM_RUN_ID=named", "DISTCOMM_STORE_TOKEN="}),
            std::set<std::string>{"id=named token=64"});
}

TEST(Identity, SpawnGivesEachCallItsOwn) {
  auto identities = [] {
    const std::string path = temp_path("spawn_ids");
    spawn(2, [&](int rank, int) {
      std::ofstream(path + std::to_string(rank)) << std::getenv("DISTCOMM_RUN_ID") << " "
                                                 << std::getenv("DISTCOMM_STORE_TOKEN");
    });
    std::set<std::string> seen;
    for (int r = 0; r < 2; ++r) {
      std::string id, token;
      std::ifstream(path + std::to_string(r)) >> id >> token;
      EXPECT_EQ(token.size(), 64u);
      seen.insert(id + " " + token);
      std::remove((path + std::to_string(r)).c_str());
    }
    return seen;
  };
  const std::set<std::string> first = identities(), second = identities();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(*first.begin(), *second.begin());
}

// init_process_group takes the identity from the environment: a rank given the wrong
// token fails its init at once, saying so, and rank 0 gives up at its own timeout.
TEST(Identity, InitReadsItFromTheEnvironment) {
  const int port = unused_port();
  const JobIdentity id = new_job_identity();
  Children ranks(2, [&](int rank) {
    ::setenv(kRunIdVariable, id.run_id.c_str(), 1);
    ::setenv(kStoreTokenVariable, rank == 0 ? id.token.c_str() : "not the token", 1);
    InitOptions o;
    o.backend = "gloo";
    o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    o.rank = rank;
    o.world_size = 2;
    o.timeout = rank == 0 ? 1500ms : kTestTimeout;
    if (rank == 0) {
      const auto [message, took] = error_of<Timeout>([&] { init_process_group(o); });
      CHILD_CHECK(message != "nothing was thrown");  // waiting for rank 1, which never came
      CHILD_CHECK(took >= 1500ms);
      return;
    }
    const auto [message, took] = error_of<StoreError>([&] { init_process_group(o); });
    CHILD_CHECK(message.find("wrong store token") != std::string::npos);
    CHILD_CHECK(took < 3s);  // rank 0 may start a moment later: the connection is retried
  });
  EXPECT_EQ(ranks.join(30s), "");
}

}  // namespace
}  // namespace distcomm
