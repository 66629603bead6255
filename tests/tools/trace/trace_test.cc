// tools/trace and the recorder end to end: real ranks under tools/launch over gloo, their
// dumps, `trace analyze`, a DDP run's timeline and its SVG.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/subprocess.h"
#include "tests/testing/test_files.h"
#include "tools/trace/json_value.h"

namespace distcomm {
namespace testing {
namespace {

const std::string kLaunch = runfile("tools/launch/launch");
const std::string kProbe = runfile("tests/tools/trace/trace_probe");
const std::string kTrace = runfile("tools/trace/trace");
const std::string kDdpTrain = runfile("examples/ddp_train");

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  run({"rm", "-rf", dir});
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

Finished analyze(const std::string& dir) {
  Finished f = run({kTrace, "analyze", dir});
  std::fprintf(stderr, "trace analyze %s:\n%s%s", dir.c_str(), f.out.c_str(), f.err.c_str());
  return f;
}

TEST(Trace, ARankThatSkipsAnAllReduceIsNamedFromTheTimeoutDumps) {
  const std::string dir = fresh_dir("skip");
  Finished job = run({kLaunch, "--nproc_per_node=3", "--trace_dir=" + dir, "--", kProbe, "skip"}, std::chrono::seconds(90));
  ASSERT_EQ(exit_code(job), 0) << job.out << job.err;
  EXPECT_NE(job.out.find("rank 0: timed out in all_reduce #3, dump written"), std::string::npos) << job.out;
  EXPECT_NE(job.out.find("rank 2: timed out in all_reduce #3, dump written"), std::string::npos) << job.out;
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(exists(dir + "/rank_" + std::to_string(r) + ".json")) << r;

  Finished f = analyze(dir);
  ASSERT_EQ(exit_code(f), 0);
  EXPECT_NE(f.out.find("group 'world' (3 ranks, gloo)"), std::string::npos);
  // Rank 1 waits in a recv instead: named, not "nothing issued since" (helper-69).
  EXPECT_NE(f.out.find("rank 1: last completed all_reduce #2 float32[4] sum; no collective issued since; "
                       "point-to-point not finished: recv p2p#0 float32[8] from 0 tag 42"),
            std::string::npos);
  EXPECT_NE(f.out.find("stuck at all_reduce #3 float32[4] sum:\n    behind: rank 1 never issued all_reduce #3"),
            std::string::npos);
  EXPECT_NE(f.out.find("    rank 1's point-to-point not finished: recv p2p#0 float32[8] from 0 tag 42"),
            std::string::npos);
  EXPECT_NE(f.out.find("failed in it: ranks [0, 2]"), std::string::npos);
  EXPECT_NE(f.out.find("first failure: rank "), std::string::npos);
  EXPECT_NE(f.out.find("all_reduce #3 float32[4] sum at "), std::string::npos);
  EXPECT_NE(f.out.find("distcomm::Timeout"), std::string::npos);
}

TEST(Trace, SigusrOneDumpsARunningJobWithoutStoppingIt) {
  const std::string dir = fresh_dir("sigusr1");
  Finished job = run({kLaunch, "--nproc_per_node=2", "--", kProbe, "sigusr1"}, std::chrono::seconds(90),
                     {"TMPDIR=" + dir});
  ASSERT_EQ(exit_code(job), 0) << job.out << job.err;
  EXPECT_NE(job.out.find("rank 0: dump after SIGUSR1"), std::string::npos) << job.out;
  EXPECT_NE(job.out.find("rank 0: 12 all_reduces done"), std::string::npos) << job.out;
  EXPECT_NE(job.out.find("rank 1: 12 all_reduces done"), std::string::npos) << job.out;
  const std::string path = dir + "/distcomm_trace/rank_0.json";
  const trace::JsonValue doc = trace::parse_json_file(path);
  EXPECT_EQ(doc.str("reason"), "SIGUSR1");
  EXPECT_EQ(doc.integer("rank"), 0);
  EXPECT_FALSE(doc.str("host").empty());
  ASSERT_EQ(doc["groups"].items.size(), 1u);
  const trace::JsonValue& world = doc["groups"].items[0];
  EXPECT_EQ(world.str("name"), "world");
  ASSERT_FALSE(world["versions"].items.empty());
  EXPECT_EQ(world["versions"].items[0].text.rfind("cpu: gloo", 0), 0u);
  // The six all_reduces before the signal, completed, with their fingerprints.
  int completed = 0;
  for (const trace::JsonValue& op : world["ops"].items) {
    if (op.str("op") == "all_reduce" && op.str("state") == "completed") {
      EXPECT_EQ(op.integer("seq"), completed);
      EXPECT_EQ(op.str("dtype"), "float32");
      EXPECT_EQ(op.integer("count"), 4);
      EXPECT_GE(op.integer("ended_ns"), op.integer("started_ns"));
      ++completed;
    }
  }
  EXPECT_EQ(completed, 6);
}

// SIGUSR1 to the launcher (the one pid a user knows) asks its ranks for their dumps, and the
// job runs on: it used to end the launcher (SIGUSR1's default action), and with it the job,
// with no dump at all. With --trace_dir the dumps go there; without, where the ranks dump by
// themselves ($TMPDIR/distcomm_trace), as the launcher says.
TEST(Trace, SigusrOneToTheLauncherDumpsEveryRankAndTheJobRunsOn) {
  for (const bool with_trace_dir : {true, false}) {
    SCOPED_TRACE(with_trace_dir ? "--trace_dir" : "no --trace_dir");
    const std::string tmp = fresh_dir(with_trace_dir ? "launcher_sigusr1" : "launcher_sigusr1_tmp");
    const std::string dir = with_trace_dir ? tmp + "/traces" : tmp + "/distcomm_trace";
    std::vector<std::string> argv = {kLaunch, "--nproc_per_node=3"};
    if (with_trace_dir) argv.push_back("--trace_dir=" + dir);
    for (const std::string& a : {std::string("--"), kProbe, std::string("launcher_sigusr1")}) argv.push_back(a);
    Finished job = run(argv, std::chrono::seconds(90), {"TMPDIR=" + tmp});
    ASSERT_EQ(exit_code(job), 0) << job.out << job.err;
    EXPECT_NE(job.err.find("launch: got SIGUSR1: asked 3 ranks for a trace dump into " + dir), std::string::npos)
        << job.err;
    if (!with_trace_dir) {
      EXPECT_NE(job.err.find("$TMPDIR/distcomm_trace"), std::string::npos) << job.err;
    }
    EXPECT_NE(job.out.find("rank 0: every rank dumped after SIGUSR1 to the launcher"), std::string::npos) << job.out;
    for (int r = 0; r < 3; ++r) {
      EXPECT_NE(job.out.find("rank " + std::to_string(r) + ": 7 all_reduces done"), std::string::npos) << job.out;
    }
    // The dumps the signal asked for (rank 0 saw them all written). With --trace_dir the
    // ranks dump once more as they exit; without, a clean exit writes none over them.
    if (with_trace_dir) continue;
    for (int r = 0; r < 3; ++r) {
      const trace::JsonValue doc = trace::parse_json_file(dir + "/rank_" + std::to_string(r) + ".json");
      EXPECT_EQ(doc.str("reason"), "SIGUSR1") << r;
    }
    Finished f = analyze(dir);
    EXPECT_EQ(exit_code(f), 0);
    EXPECT_NE(f.out.find("3 dumps: rank 0 ("), std::string::npos) << f.out;
  }
}

TEST(Trace, TheLauncherCollectsTheDumpsOfAJobWhoseRankDied) {
  const std::string dir = fresh_dir("died");
  Finished job = run({kLaunch, "--nproc_per_node=3", "--trace_dir=" + dir, "--", kProbe, "die"}, std::chrono::seconds(90));
  EXPECT_EQ(exit_code(job), 128 + 9) << job.out << job.err;
  EXPECT_NE(job.err.find("rank 2 failed: asking 2 ranks for a trace dump (SIGUSR1) into " + dir), std::string::npos)
      << job.err;
  for (int r : {0, 1}) {
    const std::string path = dir + "/rank_" + std::to_string(r) + ".json";
    ASSERT_TRUE(exists(path)) << path << "\n" << job.err;
    EXPECT_EQ(trace::parse_json_file(path).str("reason"), "SIGUSR1");
  }
  EXPECT_FALSE(exists(dir + "/rank_2.json"));
  Finished f = analyze(dir);
  EXPECT_NE(f.out.find("no dump from ranks [2]"), std::string::npos);
  EXPECT_NE(f.out.find("rank 0: last completed all_reduce #2 float32[4] sum; no collective issued since"), std::string::npos);
  EXPECT_NE(f.out.find("no op failed"), std::string::npos);
  // The dead rank is named from what the launcher saw (launcher_node0.json), not only as
  // absent (before: "no dump from ranks [2]" and "no op failed", nothing more).
  const trace::JsonValue record = trace::parse_json_file(dir + "/launcher_node0.json");
  EXPECT_EQ(record.str("format"), "distcomm-launcher-record");
  EXPECT_EQ(record["first_failure"].integer("rank"), 2);
  EXPECT_NE(f.out.find("    rank 2 died (signal SIGKILL, seen by the launcher)\n"), std::string::npos);
  EXPECT_NE(f.out.find("stopped by the launcher: ranks [0, 1]"), std::string::npos);
  EXPECT_NE(f.out.find("launcher's first failure: rank 2 (local rank 2, pid "), std::string::npos);
}

// A rank that fails while the others are still starting: they have no SIGUSR1 handler yet
// (distcomm installs it with the first group), so the launcher does not ask them for a dump
// (the signal's default action would end them) and stops them as it stops any rank. Before:
// they were sent SIGUSR1 and "died (signal SIGUSR1)".
TEST(Trace, RanksStillStartingAreNotAskedForADump) {
  const std::string dir = fresh_dir("early");
  Finished job = run({kLaunch, "--nproc_per_node=3", "--trace_dir=" + dir, "--", kProbe, "early"}, std::chrono::seconds(90));
  EXPECT_EQ(exit_code(job), 3) << job.out << job.err;
  EXPECT_NE(job.err.find("no trace dump asked of rank(s) 1, 2: no SIGUSR1 handler"), std::string::npos) << job.err;
  EXPECT_EQ(job.err.find("asking"), std::string::npos) << job.err;
  EXPECT_EQ(job.err.find("SIGUSR1)"), std::string::npos) << job.err;
  const trace::JsonValue record = trace::parse_json_file(dir + "/launcher_node0.json");
  EXPECT_EQ(record["first_failure"].integer("rank"), 0);
  const std::string text = read_file(dir + "/launcher_node0.json");
  EXPECT_EQ(text.find("SIGUSR1"), std::string::npos) << text;
}

// A --trace_dir used again: the earlier job's dumps are moved aside by the launcher (said
// in one line), and `trace analyze` does not mix dumps of two jobs (their run ids) when one
// is put back. Before: a dead rank's dump of the earlier job (reason exit) was read as its
// last word ("last completed all_reduce #2; no collective issued since").
TEST(Trace, AReusedTraceDirHoldsOnlyTheNewJobsDumps) {
  const std::string dir = fresh_dir("reused");
  Finished first = run({kLaunch, "--nproc_per_node=3", "--trace_dir=" + dir, "--", kProbe, "ok"}, std::chrono::seconds(90));
  ASSERT_EQ(exit_code(first), 0) << first.out << first.err;
  const std::string first_run = trace::parse_json_file(dir + "/rank_2.json").str("run_id");
  EXPECT_FALSE(first_run.empty());
  Finished job = run({kLaunch, "--nproc_per_node=3", "--trace_dir=" + dir, "--", kProbe, "die"}, std::chrono::seconds(90));
  EXPECT_EQ(exit_code(job), 128 + 9) << job.out << job.err;
  EXPECT_NE(job.err.find("launch: --trace_dir=" + dir + ": moved an earlier job's 4 files (launcher_node0.json, rank_0.json, "
                         "rank_1.json, rank_2.json) to " + dir + "/previous_job\n"),
            std::string::npos)
      << job.err;
  EXPECT_FALSE(exists(dir + "/rank_2.json"));
  const std::string second_run = trace::parse_json_file(dir + "/rank_0.json").str("run_id");
  EXPECT_NE(second_run, first_run);
  EXPECT_EQ(trace::parse_json_file(dir + "/previous_job/rank_2.json").str("run_id"), first_run);
  Finished f = analyze(dir);
  EXPECT_NE(f.out.find("no dump from ranks [2]"), std::string::npos);
  EXPECT_EQ(f.out.find("rank 2: last completed"), std::string::npos);

  // The earlier job's dump put back (as a program run without the launcher would leave it).
  run({"cp", dir + "/previous_job/rank_2.json", dir + "/rank_2.json"});
  Finished mixed = analyze(dir);
  ASSERT_EQ(exit_code(mixed), 0) << mixed.err;
  EXPECT_NE(mixed.out.find("left out rank_2.json (run " + first_run + ", written at "), std::string::npos);
  EXPECT_NE(mixed.out.find("analysed: run " + second_run + ", the newest job in the folder"), std::string::npos);
  EXPECT_NE(mixed.out.find("no dump from ranks [2]"), std::string::npos);
  EXPECT_EQ(mixed.out.find("rank 2: last completed"), std::string::npos);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A --trace_dir shared by every machine's launcher of one job (a shared file system): a
// launcher that starts late finds dumps and launcher records of its own job there, which
// it must not move (same run id); another job's are moved. Before: every launcher moved
// (and removed previous_job/ with what another launcher had just moved into it) whatever
// was there, this job's too.
TEST(Trace, ALauncherMovesOnlyAnotherJobsFilesFromASharedTraceDir) {
  const std::string dir = fresh_dir("shared");
  const std::string ours = "trace-shared-run-1";
  write_text(dir + "/rank_7.json", "{\"format\":\"distcomm-trace-dump\",\"version\":1,\"run_id\":\"" + ours + "\",\"rank\":7}\n");
  write_text(dir + "/launcher_node1.json",
             "{\"format\":\"distcomm-launcher-record\",\"version\":1,\"run_id\":\"" + ours + "\",\"node_rank\":1}\n");
  write_text(dir + "/rank_8.json", "{\"format\":\"distcomm-trace-dump\",\"version\":1,\"run_id\":\"an-earlier-run\",\"rank\":8}\n");
  Finished job = run({kLaunch, "--nproc_per_node=3", "--trace_dir=" + dir, "--", kProbe, "ok"}, std::chrono::seconds(90),
                     {"DISTCOMM_RUN_ID=" + ours});
  ASSERT_EQ(exit_code(job), 0) << job.out << job.err;
  EXPECT_TRUE(exists(dir + "/rank_7.json")) << "this job's dump was moved: " << job.err;
  EXPECT_TRUE(exists(dir + "/launcher_node1.json")) << "this job's node 1's record was moved: " << job.err;
  EXPECT_TRUE(exists(dir + "/previous_job/rank_8.json")) << job.err;
  EXPECT_FALSE(exists(dir + "/rank_8.json"));
  EXPECT_NE(job.err.find("moved an earlier job's 1 file (rank_8.json) to " + dir + "/previous_job\n"), std::string::npos)
      << job.err;
  EXPECT_EQ(trace::parse_json_file(dir + "/rank_0.json").str("run_id"), ours);
  EXPECT_EQ(trace::parse_json_file(dir + "/launcher_node0.json").str("run_id"), ours);
}

// A move that cannot be made (previous_job is a plain file here) leaves every file where it
// is and says so. Before: the launcher removed previous_job and, had its mkdir failed,
// deleted the earlier job's dumps and attempt_<N>/ folders instead of moving them.
TEST(Trace, AnEarlierJobsFilesThatCannotBeMovedAreLeftNotDeleted) {
  const std::string dir = fresh_dir("cannot_move");
  write_text(dir + "/previous_job", "a user's file\n");
  write_text(dir + "/rank_9.json", "{\"format\":\"distcomm-trace-dump\",\"version\":1,\"run_id\":\"an-earlier-run\",\"rank\":9}\n");
  write_text(dir + "/rank_9.json.tmp1234", "{\"format\":");
  ::mkdir((dir + "/attempt_1").c_str(), 0755);
  write_text(dir + "/attempt_1/rank_0.json", "{\"run_id\":\"an-earlier-run-restart1\"}\n");
  Finished job = run({kLaunch, "--nproc_per_node=3", "--trace_dir=" + dir, "--", kProbe, "ok"}, std::chrono::seconds(90));
  ASSERT_EQ(exit_code(job), 0) << job.out << job.err;
  EXPECT_EQ(read_text(dir + "/previous_job"), "a user's file\n");
  EXPECT_TRUE(exists(dir + "/rank_9.json")) << job.err;
  EXPECT_TRUE(exists(dir + "/rank_9.json.tmp1234")) << job.err;
  EXPECT_TRUE(exists(dir + "/attempt_1/rank_0.json")) << job.err;
  EXPECT_NE(job.err.find("launch: --trace_dir=" + dir + ": left an earlier job's 3 files (attempt_1, rank_9.json, "
                         "rank_9.json.tmp1234) where they are: " + dir + "/previous_job is not a folder"),
            std::string::npos)
      << job.err;
  // analyze still reads the new job alone.
  Finished f = analyze(dir);
  EXPECT_NE(f.out.find("left out rank_9.json (run an-earlier-run"), std::string::npos) << f.out;
}

// A job of two machines writes two launcher records in one folder (launcher_node0.json,
// launcher_node1.json): analyze reads both. Before: one launcher.json, which each machine's
// launcher overwrote, so analyze saw one machine. Here node 1 ran rank 2, which died; node
// 0's launcher stopped ranks 0 and 1 (the records are written as they would be).
TEST(Trace, AnalyzeMergesEveryMachinesLauncherRecord) {
  const std::string dir = fresh_dir("two_nodes");
  Finished job = run({kLaunch, "--nproc_per_node=3", "--trace_dir=" + dir, "--", kProbe, "die"}, std::chrono::seconds(90));
  ASSERT_EQ(exit_code(job), 128 + 9) << job.out << job.err;
  const std::string id = trace::parse_json_file(dir + "/rank_0.json").str("run_id");
  const int64_t t = trace::parse_json_file(dir + "/launcher_node0.json").integer("time_ns");
  ASSERT_EQ(::unlink((dir + "/launcher_node0.json").c_str()), 0);
  auto rank = [](int r, const std::string& ended, const std::string& sig, bool stopped, bool failed) {
    return "{\"rank\":" + std::to_string(r) + ",\"local_rank\":" + std::to_string(r % 2) + ",\"pid\":" +
           std::to_string(1000 + r) + ",\"ended\":\"" + ended + "\",\"exit_code\":" + (sig.empty() ? "143" : "137") +
           ",\"signal\":\"" + sig + "\",\"stopped_by_launcher\":" + (stopped ? "true" : "false") +
           ",\"failed\":" + (failed ? "true" : "false") + ",\"ended_ns\":1}";
  };
  auto record = [&](int node, int exit, const std::string& first, const std::string& ranks) {
    return "{\"format\":\"distcomm-launcher-record\",\"version\":1,\"run_id\":\"" + id + "\",\"restart\":0,\"node_rank\":" +
           std::to_string(node) + ",\"time_ns\":" + std::to_string(t) + ",\"exit_code\":" + std::to_string(exit) +
           ",\"interrupted_by\":\"\",\"first_failure\":" + first + ",\"ranks\":[" + ranks + "]}\n";
  };
  write_text(dir + "/launcher_node0.json",
             record(0, 1, "null", rank(0, "signal SIGTERM", "", true, false) + "," + rank(1, "signal SIGTERM", "", true, false)));
  write_text(dir + "/launcher_node1.json",
             record(1, 137, "{\"rank\":2,\"how\":\"signal SIGKILL (Killed)\",\"failure\":\"rank 2 (local rank 0) failed first\"}",
                    rank(2, "signal SIGKILL (Killed)", "SIGKILL", false, true)));
  Finished f = analyze(dir);
  ASSERT_EQ(exit_code(f), 0) << f.err;
  EXPECT_NE(f.out.find("    rank 2 died (signal SIGKILL, seen by the launcher)\n"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("launcher of node 0: exit code 1; stopped by the launcher: ranks [0, 1]\n"), std::string::npos)
      << f.out;
  EXPECT_NE(f.out.find("launcher of node 1: exit code 137; rank 2 died (signal SIGKILL, seen by the launcher)\n"),
            std::string::npos)
      << f.out;
  EXPECT_NE(f.out.find("launcher of node 1's first failure: rank 2 (local rank 0) failed first\n"), std::string::npos)
      << f.out;
  EXPECT_EQ(f.out.find("left out"), std::string::npos) << f.out;
}

// A job the launcher stops (rank 2 died; ranks 0 and 1 sit in a long computation until
// the SIGTERM): the stopped ranks append their events to the timeline on the way out
// (helper-69: the file was missing, since only the exit flush wrote it).
TEST(Trace, AStoppedJobsRanksWriteTheirTimeline) {
  const std::string dir = fresh_dir("stopped_timeline");
  const std::string file = dir + "/timeline.json";
  Finished job = run({kLaunch, "--nproc_per_node=3", "--timeline=" + file, "--", kProbe, "die"}, std::chrono::seconds(90));
  EXPECT_EQ(exit_code(job), 128 + 9) << job.out << job.err;
  ASSERT_TRUE(exists(file)) << job.err;
  const trace::JsonValue doc = trace::parse_json_file(file);
  std::map<int64_t, int> all_reduces;  // by rank (pid)
  for (const trace::JsonValue& e : doc["traceEvents"].items) {
    if (e.str("name") == "all_reduce" && e.str("ph") == "X") ++all_reduces[e.integer("pid")];
  }
  EXPECT_EQ(all_reduces[0], 3) << "rank 0's three all_reduces";
  EXPECT_EQ(all_reduces[1], 3) << "rank 1's three all_reduces";
}

// A job stopped in a hang: the ops every rank was stuck in are on the timeline, as bars up
// to the stop marked unfinished (helper-73: only the finished ops were, the very ops a hang
// is about were not).
void expect_the_ops_it_was_stuck_in(const std::string& name, const std::string& stop_signal,
                                    const std::vector<std::string>& flags = {}) {
  const std::string dir = fresh_dir(name);
  const std::string file = dir + "/timeline.json";
  std::vector<std::string> argv = {kLaunch, "--nproc_per_node=3", "--timeline=" + file};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const std::string& a : {std::string("--"), kProbe, std::string("hang"), stop_signal}) argv.push_back(a);
  Finished job = run(argv, std::chrono::seconds(90));
  EXPECT_EQ(exit_code(job), 128 + (stop_signal == "sigint" ? 2 : 15)) << job.out << job.err;
  ASSERT_TRUE(exists(file)) << job.err;
  const trace::JsonValue doc = trace::parse_json_file(file);
  std::map<std::string, int> count;  // "<pid> <name> <state>"
  for (const trace::JsonValue& e : doc["traceEvents"].items) {
    if (e.str("ph") != "X") continue;
    const trace::JsonValue& args = e["args"];
    ++count[std::to_string(e.integer("pid")) + " " + e.str("name") + " " + args.str("state")];
    if (args.str("state") == "started") {
      EXPECT_EQ(args.str("error"), "unfinished when the rank was stopped");
      EXPECT_GE(e.real("dur"), 250000) << "from its start to the stop, 300 ms after (in us)";
    }
  }
  for (const std::string pid : {"0", "2"}) {
    EXPECT_EQ(count[pid + " all_reduce completed"], 3) << pid;
    EXPECT_EQ(count[pid + " all_reduce started"], 1) << "rank " << pid << "'s all_reduce #3";
  }
  EXPECT_EQ(count["1 all_reduce completed"], 3);
  EXPECT_EQ(count["1 recv started"], 1) << "rank 1's recv";
}

TEST(Trace, AStoppedJobsTimelineShowsTheOpsItWasStuckIn) { expect_the_ops_it_was_stuck_in("hung_timeline", "sigterm"); }

// Stopped by a Ctrl-C: the launcher passes SIGINT on to the ranks, which write their
// timeline as on SIGTERM (before: SIGINT's default action ended them with nothing written).
// With --trace_dir the launcher's SIGUSR1 comes first: its timeline append is finished
// before the rank ends (before: SIGINT could end a rank halfway, leaving it out).
TEST(Trace, AJobStoppedByCtrlCHasTheOpsItWasStuckInOnItsTimeline) {
  expect_the_ops_it_was_stuck_in("sigint_timeline", "sigint");
  expect_the_ops_it_was_stuck_in("sigint_trace_timeline", "sigint", {"--trace_dir=" + fresh_dir("sigint_dumps")});
}

TEST(Trace, ADdpTimelineHasEveryRanksOpsAndBucketsAndDrawsAsSvg) {
  const std::string dir = fresh_dir("timeline");
  const std::string file = dir + "/timeline.json";
  Finished job = run({kLaunch, "--nproc_per_node=2", "--timeline=" + file, "--", kDdpTrain, "--epochs=1",
                      "--samples=256"},
                     std::chrono::seconds(120));
  ASSERT_EQ(exit_code(job), 0) << job.out << job.err;
  const trace::JsonValue doc = trace::parse_json_file(file);
  std::map<std::string, int> count;  // "<pid> <ph> <name>" -> events
  std::set<std::string> lanes;
  for (const trace::JsonValue& e : doc["traceEvents"].items) {
    const std::string ph = e.str("ph");
    std::string name = e.str("name");
    if (name.rfind("bucket ", 0) == 0) name = "bucket " + name.substr(name.rfind(' ') + 1);  // "bucket 3 ready" -> "bucket ready"
    ++count[std::to_string(e.integer("pid")) + " " + ph + " " + name];
    if (ph == "M" && e.str("name") == "thread_name") lanes.insert(std::to_string(e.integer("pid")) + " " + e["args"].str("name"));
    if (ph == "X" && e.str("name") == "all_reduce") {
      const trace::JsonValue& args = e["args"];
      EXPECT_GT(args.integer("bytes"), 0);
      EXPECT_FALSE(args.str("dtype").empty());
      EXPECT_TRUE(args.has("seq"));
      EXPECT_GE(e.real("dur"), 0);
      EXPECT_EQ(args.str("state"), "completed");
    }
  }
  for (const std::string pid : {"0", "1"}) {
    EXPECT_EQ(count[pid + " M process_name"], 1) << pid;
    EXPECT_TRUE(lanes.count(pid + " world")) << pid;
    EXPECT_TRUE(lanes.count(pid + " ddp world")) << pid;
    EXPECT_GE(count[pid + " X broadcast"], 1) << pid;  // DDP's initial copy of rank 0's weights
    const int reductions = count[pid + " X all_reduce"];
    const int buckets = count[pid + " b bucket all_reduce"];
    EXPECT_EQ(count[pid + " e bucket all_reduce"], buckets) << pid;
    EXPECT_GE(buckets, 8) << pid;  // 8 steps of 2 x 32 samples, one bucket at least each
    EXPECT_GE(reductions, buckets) << pid;  // every bucket's all_reduce is an op of the group
    EXPECT_EQ(count[pid + " i bucket ready"], buckets) << pid;
    EXPECT_EQ(count[pid + " X bucket waited"], buckets) << pid;
  }
  EXPECT_EQ(count["0 X all_reduce"], count["1 X all_reduce"]);

  const std::string svg = dir + "/timeline.svg";
  Finished drawn = run({kTrace, "timeline", file, "--svg", svg});
  ASSERT_EQ(exit_code(drawn), 0) << drawn.out << drawn.err;
  EXPECT_NE(drawn.out.find("2 ranks, 4 rows"), std::string::npos) << drawn.out;
  Finished lint = run({"xmllint", "--noout", svg});
  EXPECT_EQ(exit_code(lint), 0) << "not well-formed XML: " << lint.out << lint.err;
  const std::string text = read_file(svg);
  EXPECT_NE(text.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(text.find(">rank 1 ddp world</text>"), std::string::npos);
  EXPECT_NE(text.find(">all_reduce</text>"), std::string::npos);  // in the legend
}

// A hang whose cause is a rank stopped by job control (SIGSTOP: frozen): the launcher sees
// it stopped, says so as it stops the job, and writes it into its record
// ("job_control_stop"), which `trace analyze` quotes as a fact. Before: the record said
// nothing of it, and analyze could only guess from the dumps' times ("late (stopped, or
// busy in the program)").
TEST(Trace, ARankStoppedInAHangIsNamedStoppedFromTheLaunchersRecord) {
  const std::string dir = fresh_dir("sigstop");
  Subprocess job({kLaunch, "--nproc_per_node=2", "--trace_dir=" + dir, "--", "/bin/sh", "-c",
                  "if [ \"$RANK\" = 1 ]; then echo stopping; kill -STOP $$; fi; exec sleep 60"});
  ASSERT_TRUE(job.wait_for_stdout("stopping", 1, std::chrono::seconds(30)));
  // Stopped for a while, as in a hang. The launcher looks at most every 0.5 s, but only when
  // it wakes (output, a signal, at least once a second): it sees the stop within ~1 s.
  ::usleep(2'500'000);
  job.send_signal(SIGTERM);
  Finished f = job.finish(std::chrono::seconds(30));
  EXPECT_EQ(exit_code(f), 128 + SIGTERM) << f.err;
  EXPECT_NE(f.err.find(") is stopped (SIGSTOP, SIGTSTP: frozen), seen so for "), std::string::npos) << f.err;
  const trace::JsonValue record = trace::parse_json_file(dir + "/launcher_node0.json");
  ASSERT_EQ(record["ranks"].items.size(), 2u) << read_file(dir + "/launcher_node0.json");
  for (const trace::JsonValue& r : record["ranks"].items) {
    const trace::JsonValue& stop = r["job_control_stop"];
    if (r.integer("rank") == 0) {
      EXPECT_FALSE(stop.is_object()) << read_file(dir + "/launcher_node0.json");
      continue;
    }
    ASSERT_TRUE(stop.is_object()) << read_file(dir + "/launcher_node0.json");
    EXPECT_GT(stop.integer("since_ns"), 0);
    EXPECT_GE(stop.integer("seen_ns") - stop.integer("since_ns"), 1'000'000'000) << "seen stopped only at the end";
  }
  Finished a = analyze(dir);
  EXPECT_EQ(exit_code(a), 0) << a.err;
  EXPECT_NE(a.out.find("; rank 1 was stopped (SIGSTOP/frozen) per the launcher, for at least "), std::string::npos)
      << a.out;
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
