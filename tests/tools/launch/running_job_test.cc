// A static job across machines (two launchers on 127.0.0.1, node 0 and node 1) that is
// already running, and launchers or clients that do not belong to it: a late launcher given
// another shape, a client of another world size, a launcher with a wrong store token or run
// id. The job runs on; the stranger ends saying why, and starts no rank.
//
// Before, the late launcher's shape check (a start-up check) ended node 0's healthy job, and
// a launcher that node 0's store refused started its ranks "unchecked", which the store then
// refused one by one. Last, the elastic counterpart of a refusal: what a launcher refused by
// its rendezvous store adds for the user who set --rdzv_id and --rdzv_endpoint.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "api/errors.h"
#include "api/process/local_processes.h"
#include "api/store/server/tcp_store_server.h"
#include "api/store/tcp_store.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

const std::vector<std::string> kEnv = {"DISTCOMM_RUN_ID=running_job", "DISTCOMM_STORE_TOKEN=secret"};

// Each rank says "up", then runs until `release` exists (at most 60 s), or 4 s without one:
// a fixed time made the test depend on how soon a loaded machine let the stranger come.
std::vector<std::string> node(int node_rank, int nproc_per_node, const std::string& port,
                              const std::string& release = "") {
  const std::string wait = release.empty() ? "sleep 4"
                                           : "i=0; while [ ! -e '" + release +
                                                 "' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done";
  return launch({"--nnodes=2", "--node_rank=" + std::to_string(node_rank),
                 "--nproc_per_node=" + std::to_string(nproc_per_node), "--master_port=" + port},
                {"/bin/sh", "-c", "echo up; " + wait + "; echo done"});
}

std::string release_path(const std::string& port) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/running_job_release_" + port;
}

// Node 0 and node 1 of the job, both started (each one's rank said "up").
struct RunningJob {
  explicit RunningJob(const std::string& port)
      : release(release_path(port)),
        node0(node(0, 1, port, release), kEnv),
        node1(node(1, 1, port, release), kEnv) {
    EXPECT_TRUE(node0.wait_for_stdout("[rank 0] up", 1, seconds(30))) << node0.stdout_so_far();
    EXPECT_TRUE(node1.wait_for_stdout("[rank 1] up", 1, seconds(30))) << node1.stdout_so_far();
  }
  // Both end well: no rank was stopped for the stranger.
  void expect_both_succeed() {
    std::ofstream(release) << "done\n";  // the stranger has been dealt with: the ranks may end
    const Finished f0 = node0.finish(seconds(30));
    const Finished f1 = node1.finish(seconds(30));
    EXPECT_EQ(exit_code(f0), 0) << f0.err;
    EXPECT_EQ(exit_code(f1), 0) << f1.err;
    EXPECT_NE(f0.out.find("[rank 0] done"), std::string::npos) << f0.out << f0.err;
    EXPECT_NE(f1.out.find("[rank 1] done"), std::string::npos) << f1.out << f1.err;
    EXPECT_EQ(f0.err.find("the job cannot run"), std::string::npos) << f0.err;
    err0 = f0.err;
  }
  const std::string release;  // the file whose existence lets the ranks end
  Subprocess node0;
  Subprocess node1;
  std::string err0;  // node 0's stderr, once finished
};

// The user's case: a launcher on a third machine given node 1 with 2 ranks per node.
TEST(RunningJob, LateLauncherOfAnotherShapeIsRefusedAndTheJobRunsOn) {
  const std::string port = std::to_string(local::pick_free_port());
  RunningJob job(port);
  const Finished stranger = run(node(1, 2, port), seconds(30), kEnv);
  EXPECT_EQ(exit_code(stranger), 1) << stranger.err;
  const std::vector<std::string> lines = lines_of(stranger.err);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "launch: the job cannot run: node 0's job is already running with 2 nodes x 1 rank per "
                          "node (node 1's launcher has joined it), this launcher (node 1) was given 2 nodes x 2 "
                          "ranks per node: it starts no rank, and that job runs on");
  EXPECT_EQ(stranger.out.find("[rank "), std::string::npos) << stranger.out;
  job.expect_both_succeed();
  // Node 0's launcher says so in one line.
  EXPECT_NE(job.err0.find("launch: refused a launcher on "), std::string::npos) << job.err0;
  EXPECT_NE(job.err0.find(" given node 1 of 2 nodes x 2 ranks per node: this job runs 2 nodes x 1 rank per node and "
                          "node 1's launcher has joined it already; the job runs on"),
            std::string::npos)
      << job.err0;
  EXPECT_TRUE(no_orphan_running());
}

// A bare client with the job's token that names another world size: refused, and the job
// (whose every node's launcher has joined) runs on.
TEST(RunningJob, ClientOfAnotherWorldSizeIsRefusedAndTheJobRunsOn) {
  const std::string port = std::to_string(local::pick_free_port());
  RunningJob job(port);
  TCPStoreOptions o;
  o.port = std::stoi(port);
  o.identity = {"running_job", "secret"};
  o.num_workers = 3;
  o.timeout = std::chrono::milliseconds(5000);
  EXPECT_THROW(TCPStore{o}, StoreRefused);
  job.expect_both_succeed();
  EXPECT_NE(job.err0.find("launch: refused a launcher or rank that is not of this running job (a rank at 127.0.0.1:"),
            std::string::npos)
      << job.err0;
  EXPECT_NE(job.err0.find("every node's launcher has joined it already: the job runs on"), std::string::npos)
      << job.err0;
  EXPECT_TRUE(no_orphan_running());
}

// Node 1's launcher with a wrong token, or another run id: node 0's store refused it, so it
// ends at once with the refusal's words, and starts no rank (whose every store call would be
// refused the same way).
void expect_refused_at_once(const std::vector<std::string>& env, const std::string& words) {
  const std::string port = std::to_string(local::pick_free_port());
  Subprocess node0(node(0, 1, port), kEnv);
  ASSERT_TRUE(node0.wait_for_stdout("[rank 0] up", 1, seconds(30))) << node0.stdout_so_far();
  const auto started = std::chrono::steady_clock::now();
  const Finished f1 = run(node(1, 1, port), seconds(30), env);
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(10));
  EXPECT_EQ(exit_code(f1), 1) << f1.err;
  EXPECT_EQ(f1.out.find("[rank "), std::string::npos) << f1.out;
  EXPECT_EQ(f1.err.find("not checked"), std::string::npos) << f1.err;
  const std::vector<std::string> lines = lines_of(f1.err);
  ASSERT_EQ(lines.size(), 1u) << f1.err;
  EXPECT_EQ(lines.back().rfind("launch: the job cannot run: node 0's store at 127.0.0.1:" + port +
                                   " refused this launcher, which starts no rank: TCPStore: ",
                               0),
            0u)
      << f1.err;
  EXPECT_NE(lines.back().find(words), std::string::npos) << f1.err;
  EXPECT_EQ(exit_code(node0.finish(seconds(30))), 0);
  EXPECT_TRUE(no_orphan_running());
}

TEST(RunningJob, LauncherWithAWrongTokenStartsNoRank) {
  expect_refused_at_once({"DISTCOMM_RUN_ID=running_job", "DISTCOMM_STORE_TOKEN=wrong"}, "wrong store token");
}

TEST(RunningJob, LauncherWithAnotherRunIdStartsNoRank) {
  expect_refused_at_once({"DISTCOMM_RUN_ID=other_job", "DISTCOMM_STORE_TOKEN=secret"}, "belongs to another job");
}

// A client with the job's run id but no token (a rank started by hand without
// DISTCOMM_STORE_TOKEN) refuses itself once the store asks for the token's proof. Node 0's
// launcher logs it in one line, once, as it logs a wrong token or another run id. Before:
// nothing in the store host's log.
TEST(RunningJob, ClientWithoutATokenIsLoggedOnce) {
  const std::string port = std::to_string(local::pick_free_port());
  Subprocess node0(node(0, 1, port), kEnv);
  ASSERT_TRUE(node0.wait_for_stdout("[rank 0] up", 1, seconds(30))) << node0.stdout_so_far();
  TCPStoreOptions o;
  o.port = std::stoi(port);
  o.identity = {"running_job", ""};
  o.timeout = std::chrono::milliseconds(5000);
  for (int i = 0; i < 2; ++i) EXPECT_THROW(TCPStore{o}, StoreRefused);
  const Finished f0 = node0.finish(seconds(60));
  EXPECT_EQ(exit_code(f0), 0) << f0.err;
  const std::string words = ": it has this job's run id but proved no store token (started without DISTCOMM_STORE_TOKEN?)";
  const size_t at = f0.err.find(words);
  EXPECT_NE(at, std::string::npos) << f0.err;
  EXPECT_EQ(f0.err.find(words, at + 1), std::string::npos) << "logged twice: " << f0.err;
  EXPECT_NE(f0.err.find("refused a connection from 127.0.0.1:"), std::string::npos) << f0.err;
  EXPECT_TRUE(no_orphan_running());
}

// An elastic launcher refused by the rendezvous store at its --rdzv_endpoint: the store's
// words are a rank's (MASTER_PORT, DISTCOMM_RUN_ID, "every rank needs rank 0's ..."), so the
// launcher adds what this user set: --rdzv_id, --rdzv_endpoint, each launcher's token.
Finished elastic_launcher_against(const std::string& run_id, const std::string& token) {
  TCPStoreServerOptions o;
  o.bind_address = "127.0.0.1";
  o.identity = {run_id, "secret"};
  TCPStoreServer server(o);
  server.start();
  const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
  return run(launch({"--nnodes=2:2", "--nproc_per_node=1", "--rdzv_endpoint=" + endpoint, "--rdzv_id=job7"},
                    {"/bin/sh", "-c", "echo up"}),
             seconds(30), {"DISTCOMM_STORE_TOKEN=" + token});
}

TEST(ElasticRefusal, AnotherJobsRendezvousNamesTheRdzvId) {
  const Finished f = elastic_launcher_against("rdzv-job8", "secret");
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_NE(f.err.find("belongs to another job"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("; for an elastic job: another job's rendezvous (another --rdzv_id than this launcher's job7) "
                       "is served at 127.0.0.1:"),
            std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find(": give each job its own --rdzv_endpoint port, and every node's launcher of a job the same "
                       "--rdzv_id"),
            std::string::npos)
      << f.err;
  EXPECT_EQ(f.out.find("[rank "), std::string::npos) << f.out;
}

TEST(ElasticRefusal, AWrongTokenNamesEveryLaunchersToken) {
  const Finished f = elastic_launcher_against("rdzv-job7", "wrong");
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_NE(f.err.find("wrong store token"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("; for an elastic job: every node's launcher needs the same DISTCOMM_STORE_TOKEN as the "
                       "launcher serving the rendezvous at 127.0.0.1:"),
            std::string::npos)
      << f.err;
  EXPECT_EQ(f.out.find("[rank "), std::string::npos) << f.out;
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
