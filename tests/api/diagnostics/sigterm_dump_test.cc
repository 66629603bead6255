// A rank stopped with SIGTERM, as any launcher stops it (Slurm, mpirun, Kubernetes,
// tools/launch), leaves its flight-recorder dump in DISTCOMM_TRACE_DIR first, then ends as
// SIGTERM ends a process; a program with a SIGTERM handler of its own keeps it.
//
// Two ranks started by hand over gloo (tests/api/store/rank_probe.cc): rank 0 waits in an
// all_reduce that rank 1 never issues, and gets the signal there.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/api/store/hand_started_job.h"
#include "tools/trace/json_value.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using testing::Finished;
using testing::Subprocess;

const std::string kProbe = testing::runfile("tests/api/store/rank_probe");
const std::string kTrace = testing::runfile("tools/trace/trace");

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Two ranks of `rank_probe mode gate`, dumping into dir; returns rank 0's end once it was
// sent SIGTERM while waiting in all_reduce #1, and ends rank 1.
Finished sigterm_rank_zero_in_an_op(const std::string& mode, const std::string& dir) {
  const std::string gate = testing::temp_path(mode + "_gate");
  const testing::HandStartedJob job(2);
  auto r0 = job.start(0, {kProbe, mode, gate}, {"DISTCOMM_TRACE_DIR=" + dir});
  auto r1 = job.start(1, {kProbe, mode, gate}, {"DISTCOMM_TRACE_DIR=" + dir});
  EXPECT_TRUE(r0->wait_for_stdout("rank 0 waits in all_reduce #1", 1, 60s));
  r0->send_signal(SIGTERM);
  Finished f0 = r0->finish(30s);
  std::fprintf(stderr, "--- rank 0 (status %d):\n%s", f0.status, f0.out.c_str());
  std::ofstream(gate) << "open";
  const Finished f1 = r1->finish(30s);
  std::fprintf(stderr, "--- rank 1 (status %d):\n%s", f1.status, f1.out.c_str());
  std::remove(gate.c_str());
  return f0;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::temp_path(name);
  testing::run({"rm", "-rf", dir});
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

TEST(SigtermDump, ARankStoppedInAnOpDumpsThenEndsAsTerminated) {
  const std::string dir = fresh_dir("sigterm");
  const Finished f0 = sigterm_rank_zero_in_an_op("hang", dir);
  ASSERT_FALSE(f0.timed_out);
  EXPECT_TRUE(WIFSIGNALED(f0.status) && WTERMSIG(f0.status) == SIGTERM) << "status " << f0.status << "\n" << f0.out;
  EXPECT_NE(f0.out.find("distcomm: trace dump (SIGTERM) written to " + dir + "/rank_0.json"), std::string::npos)
      << f0.out;

  const trace::JsonValue doc = trace::parse_json_file(dir + "/rank_0.json");
  EXPECT_EQ(doc.str("reason"), "SIGTERM");
  EXPECT_EQ(doc.integer("rank"), 0);
  ASSERT_EQ(doc["groups"].items.size(), 1u);
  const std::vector<trace::JsonValue>& ops = doc["groups"].items[0]["ops"].items;
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].str("state"), "completed");
  EXPECT_EQ(ops[1].str("op"), "all_reduce");
  EXPECT_EQ(ops[1].integer("seq"), 1);
  EXPECT_EQ(ops[1].str("state"), "started");  // where it was stopped

  // tools/trace reads it with rank 1's exit dump: rank 0 was stopped inside #1.
  const Finished analyzed = testing::run({kTrace, "analyze", dir});
  std::fprintf(stderr, "trace analyze:\n%s%s", analyzed.out.c_str(), analyzed.err.c_str());
  EXPECT_EQ(testing::exit_code(analyzed), 0);
  EXPECT_NE(analyzed.out.find("2 dumps: rank 0 ("), std::string::npos) << analyzed.out;
  EXPECT_NE(analyzed.out.find(", SIGTERM), rank 1 ("), std::string::npos) << analyzed.out;
  EXPECT_NE(analyzed.out.find("then all_reduce #1 float32[1] sum (started)"), std::string::npos) << analyzed.out;
}

TEST(SigtermDump, AProgramsOwnSigtermHandlerIsKept) {
  const std::string dir = fresh_dir("own_sigterm");
  const Finished f0 = sigterm_rank_zero_in_an_op("own_term", dir);
  ASSERT_FALSE(f0.timed_out);
  EXPECT_EQ(testing::exit_code(f0), 7) << f0.out;  // its handler ran: no dump, no re-raise
  EXPECT_FALSE(exists(dir + "/rank_0.json"));
}

// Under tools/launch with DISTCOMM_TRACE_DIR in the environment (not --trace_dir), a Ctrl-C
// reaches the ranks as SIGINT (the launcher passes its signal on), which dumps nothing by
// itself: the launcher asks for the dumps (SIGUSR1) first, so that a hung job stopped with
// Ctrl-C leaves them as one stopped with SIGTERM does (found by a review of the change that
// passes the signal on).
TEST(SigtermDump, ACtrlCToTheLauncherStillLeavesEveryRanksDump) {
  const std::string dir = fresh_dir("ctrl_c");
  const std::string gate = testing::temp_path("ctrl_c_gate");
  Subprocess launcher({testing::runfile("tools/launch/launch"), "--nproc_per_node=2", "--", kProbe, "hang", gate},
                      {"DISTCOMM_TRACE_DIR=" + dir, "DISTCOMM_PLUGIN_PATH=" + testing::runfile("backends/gloo")},
                      /*merge_stderr=*/true);
  ASSERT_TRUE(launcher.wait_for_stdout("rank 0 waits in all_reduce #1", 1, 60s));
  launcher.send_signal(SIGINT);
  const Finished f = launcher.finish(30s);
  std::fprintf(stderr, "--- launcher (status %d):\n%s", f.status, f.out.c_str());
  ASSERT_FALSE(f.timed_out);
  EXPECT_EQ(testing::exit_code(f), 128 + SIGINT);
  EXPECT_NE(f.out.find("got SIGINT: asking 2 ranks for a trace dump (SIGUSR1) into " + dir), std::string::npos)
      << f.out;
  for (int rank : {0, 1}) {
    const std::string path = dir + "/rank_" + std::to_string(rank) + ".json";
    ASSERT_TRUE(exists(path)) << path;
    EXPECT_EQ(trace::parse_json_file(path).integer("rank"), rank);
  }
}

}  // namespace
}  // namespace distcomm
