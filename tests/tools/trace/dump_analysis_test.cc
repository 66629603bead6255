// `trace analyze` (tools/trace/dump_analysis.h) over dumps this test writes: the ranks'
// times, the ops they issued and the launcher's record, without running a job.
#include "tools/trace/dump_analysis.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace distcomm {
namespace trace {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kT0 = 1'796'550'000 * kSecond;  // the job's start, wall clock

struct TestOp {
  int seq;
  std::string state;
  std::string describe;
  int64_t queued_s_ms;  // ms after kT0
  int64_t ended_s_ms;   // ms after kT0, 0 if not ended
  std::string error;
};

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string dump(int rank, const std::string& reason, const std::vector<TestOp>& ops) {
  std::string o;
  for (const TestOp& op : ops) {
    if (!o.empty()) o += ",";
    const int64_t queued = kT0 + op.queued_s_ms * 1'000'000;
    o += "{\"id\":" + std::to_string(op.seq) + ",\"op\":\"x\",\"seq\":" + std::to_string(op.seq) +
         ",\"kind\":\"collective\",\"state\":" + quote(op.state) + ",\"queued_ns\":" + std::to_string(queued) +
         ",\"started_ns\":" + std::to_string(queued) +
         ",\"ended_ns\":" + std::to_string(op.ended_s_ms ? kT0 + op.ended_s_ms * 1'000'000 : 0) +
         ",\"describe\":" + quote(op.describe) + (op.error.empty() ? "" : ",\"error\":" + quote(op.error)) + "}";
  }
  return "{\"format\":\"distcomm-trace-dump\",\"version\":1,\"rank\":" + std::to_string(rank) +
         ",\"run_id\":\"r1\",\"host\":\"vm\",\"pid\":" + std::to_string(100 + rank) + ",\"reason\":" + quote(reason) +
         ",\"time_ns\":" + std::to_string(kT0 + 30 * kSecond) +
         ",\"groups\":[{\"name\":\"world\",\"rank\":" + std::to_string(rank) +
         ",\"size\":3,\"global_ranks\":[0,1,2],\"backend\":\"gloo\",\"ops\":[" + o + "]}]}\n";
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string analyze(const std::string& dir) {
  const std::string report = analyze_folder(load_dump_folder(dir));
  std::fprintf(stderr, "trace analyze %s:\n%s", dir.c_str(), report.c_str());
  return report;
}

const char kAr2[] = "all_reduce #2 float32[4] sum";
const char kAr3[] = "all_reduce #3 float32[4] sum";

// Rank 1 was stopped (SIGSTOP) before all_reduce #3; ranks 0 and 2 timed out in it and
// exited; the launcher's SIGTERM with SIGCONT let rank 1 run on and issue #3 after they
// had failed. It did not take part in time: behind, not "waiting in it" (it was, and no
// rank was named behind).
TEST(DumpAnalysis, ARankThatIssuedAnOpOnlyAfterTheOthersFailedInItIsBehind) {
  const std::string dir = fresh_dir("late");
  write_text(dir + "/rank_0.json",
                      dump(0, "exit", {{2, "completed", kAr2, 10, 11, ""},
                                       {3, "failed", kAr3, 12, 18586, "distcomm::Timeout: rank 0/3 timed out"}}));
  write_text(dir + "/rank_1.json", dump(1, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""},
                                                                 {3, "started", kAr3, 18641, 0, ""}}));
  write_text(dir + "/rank_2.json",
                      dump(2, "exit", {{2, "completed", kAr2, 10, 11, ""},
                                       {3, "failed", kAr3, 12, 18600, "distcomm::Timeout: cut this op off"}}));
  const std::string report = analyze(dir);
  EXPECT_NE(report.find("  stuck at all_reduce #3 float32[4] sum:\n"
                        "    behind: rank 1 issued all_reduce #3 float32[4] sum only after ranks [0, 2] had failed in "
                        "it: it was late (stopped, or busy in the program)\n"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("waiting in it"), std::string::npos) << report;
  EXPECT_NE(report.find("    failed in it: ranks [0, 2]\n"), std::string::npos) << report;
}

// The same, but rank 1 issued all_reduce #3 in time (before anyone failed): it waited in
// it, and nobody is behind.
TEST(DumpAnalysis, ARankThatIssuedAnOpBeforeTheOthersFailedWaitsInIt) {
  const std::string dir = fresh_dir("in_time");
  write_text(dir + "/rank_0.json",
                      dump(0, "exit", {{2, "completed", kAr2, 10, 11, ""},
                                       {3, "failed", kAr3, 12, 18586, "distcomm::Timeout: rank 0/3 timed out"}}));
  write_text(dir + "/rank_1.json", dump(1, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""},
                                                                 {3, "started", kAr3, 13, 0, ""}}));
  write_text(dir + "/rank_2.json",
                      dump(2, "exit", {{2, "completed", kAr2, 10, 11, ""},
                                       {3, "failed", kAr3, 12, 18600, "distcomm::Timeout: cut this op off"}}));
  const std::string report = analyze(dir);
  EXPECT_EQ(report.find("behind"), std::string::npos) << report;
  EXPECT_NE(report.find("    waiting in it: ranks [1]\n"), std::string::npos) << report;
  EXPECT_NE(report.find("    failed in it: ranks [0, 2]\n"), std::string::npos) << report;
}

// Rank 1 passed root 1 to broadcast #3, ranks 0 and 2 root 0: the heading names the op most
// ranks issued, and the one that differs. The launcher's record keeps one line of each
// rank's error, a Desync's ending on "Each rank's op there:" (its table followed): quoted
// cut cleanly, not as "there:;".
TEST(DumpAnalysis, AMismatchIsHeadedByTheMajoritysOpAndACutErrorIsQuotedCleanly) {
  const std::string dir = fresh_dir("root");
  const std::string desync =
      "distcomm::Desync: rank 1/3 group 'world' broadcast #3 (float32[4] on cpu): the ranks disagree on collective #3 "
      "(a rank skipped or added a collective, or passed other arguments; DISTCOMM_DEBUG=DETAIL checks every op "
      "before it runs). Each rank's op there:";
  write_text(dir + "/rank_0.json", dump(0, "exit", {{2, "completed", kAr2, 10, 11, ""},
                                                              {3, "failed", "broadcast #3 float32[4] root 0", 12, 20,
                                                               "distcomm::Desync: cut this op off"}}));
  write_text(dir + "/rank_1.json",
                      dump(1, "exit", {{2, "completed", kAr2, 10, 11, ""},
                                       {3, "failed", "broadcast #3 float32[4] root 1", 12, 15,
                                        desync + "\n  rank 0: broadcast #3 float32[4] root 0\n"}}));
  write_text(dir + "/rank_2.json", dump(2, "exit", {{2, "completed", kAr2, 10, 11, ""},
                                                              {3, "completed", "broadcast #3 float32[4] root 0", 12, 13, ""}}));
  write_text(
      dir + "/launcher_node0.json",
      "{\"format\":\"distcomm-launcher-record\",\"version\":1,\"run_id\":\"r1\",\"restart\":0,\"node_rank\":0,"
      "\"time_ns\":" + std::to_string(kT0 + 31 * kSecond) + ",\"exit_code\":1,\"interrupted_by\":\"\","
      "\"first_failure\":{\"rank\":1,\"how\":\"exit code 1\",\"failure\":" + quote("rank 1 failed first: " + desync) +
      "},\"ranks\":[{\"rank\":0,\"ended\":\"signal SIGTERM\",\"signal\":\"SIGTERM\",\"stopped_by_launcher\":true,"
      "\"failed\":false},{\"rank\":1,\"ended\":\"exit code 1\",\"signal\":\"\",\"stopped_by_launcher\":false,"
      "\"failed\":true,\"error\":" + quote(desync) + "},{\"rank\":2,\"ended\":\"signal SIGTERM\",\"signal\":\"SIGTERM\","
      "\"stopped_by_launcher\":true,\"failed\":false}]}\n");
  const std::string report = analyze(dir);
  EXPECT_NE(report.find("  stuck at broadcast #3 float32[4] root 0 (as ranks [0, 2] issued it; they differ: rank 1 "
                        "issued broadcast #3 float32[4] root 1):\n"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("there:;"), std::string::npos) << report;
  // Only the whole error (the job's first failure, last) ends its line on the colon, its
  // table below it.
  EXPECT_EQ(report.find("there:\nfirst failure"), std::string::npos) << report;
  EXPECT_NE(report.find("there:\n  rank 0: broadcast #3 float32[4] root 0\n"), std::string::npos) << report;
  EXPECT_NE(report.find("checks every op before it runs). (more lines in the rank's error"), std::string::npos) << report;
  EXPECT_NE(report.find("; stopped by the launcher: ranks [0, 2]\n"), std::string::npos) << report;
}

// Rank 1 wrote two dumps at once and left a broken file (a longer dump's tail after a
// shorter one's end). Before, analyze refused the whole folder ("not valid JSON ... text
// after the end of the document"); now it names that file and why in one line and
// analyses the others, rank 1 among the ranks without a dump.
TEST(DumpAnalysis, AnUnreadableDumpIsNamedAndTheOthersAnalysed) {
  const std::string dir = fresh_dir("broken");
  write_text(dir + "/rank_0.json", dump(0, "exit", {{2, "completed", kAr2, 10, 11, ""}, {3, "started", kAr3, 12, 0, ""}}));
  write_text(dir + "/rank_1.json", dump(1, "exit", {{2, "completed", kAr2, 10, 11, ""}}) + "]}\n");
  write_text(dir + "/rank_2.json", dump(2, "exit", {{2, "completed", kAr2, 10, 11, ""}, {3, "started", kAr3, 12, 0, ""}}));
  DumpFolder folder;
  ASSERT_NO_THROW(folder = load_dump_folder(dir));
  ASSERT_EQ(folder.unreadable.size(), 1u);
  EXPECT_EQ(folder.unreadable[0].rfind("rank_1.json: not valid JSON at byte ", 0), 0u) << folder.unreadable[0];
  const std::string report = analyze(dir);
  EXPECT_NE(report.find("unreadable, left out: rank_1.json: not valid JSON at byte "), std::string::npos) << report;
  EXPECT_NE(report.find("text after the end of the document\n"), std::string::npos) << report;
  EXPECT_NE(report.find("2 dumps: rank 0 "), std::string::npos) << report;
  EXPECT_NE(report.find("  no dump from ranks [1]\n"), std::string::npos) << report;
  // A folder with nothing readable still fails, naming each file.
  const std::string none = fresh_dir("all_broken");
  write_text(none + "/rank_0.json", "{\"format\":");
  try {
    load_dump_folder(none);
    ADD_FAILURE() << "a folder with no readable dump was analysed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rank_0.json: not valid JSON"), std::string::npos) << e.what();
  }
}

// Rank 1 was stopped (SIGSTOP) before all_reduce #3 while ranks 0 and 2 waited in it; no
// op failed (the launcher stopped the hung job, its SIGCONT and SIGTERM let rank 1 issue #3
// some 23 s after them). Before: "waiting in it: ranks [0, 1, 2]", "no op failed", nobody
// named. Now rank 1 is behind, with the times that show it.
TEST(DumpAnalysis, InAHangTheRankThatIssuedTheStuckOpLastByFarIsBehind) {
  const std::string dir = fresh_dir("stopped");
  write_text(dir + "/rank_0.json", dump(0, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""}, {3, "started", kAr3, 12, 0, ""}}));
  write_text(dir + "/rank_1.json", dump(1, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""}, {3, "started", kAr3, 23012, 0, ""}}));
  write_text(dir + "/rank_2.json", dump(2, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""}, {3, "started", kAr3, 14, 0, ""}}));
  std::string report = analyze(dir);
  EXPECT_NE(report.find("  stuck at all_reduce #3 float32[4] sum:\n"
                        "    behind: rank 1 issued all_reduce #3 float32[4] sum 23.0 s after the other ranks (the last "
                        "of them at "),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("): likely the cause, late (stopped, or busy in the program) while the others waited\n"
                        "    waiting in it: ranks [0, 2]\n"),
            std::string::npos)
      << report;
  // The same when the late rank got through the op (shm: the others' parts were there)
  // and issued the next one: it is still the one that was late.
  write_text(dir + "/rank_1.json", dump(1, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""},
                                                         {3, "completed", kAr3, 23012, 23013, ""},
                                                         {4, "started", "all_reduce #4 float32[4] sum", 23014, 0, ""}}));
  report = analyze(dir);
  EXPECT_NE(report.find("    behind: rank 1 issued all_reduce #3 float32[4] sum 23.0 s after"), std::string::npos) << report;
  // Ranks that issued it within a second of each other: nobody is behind.
  write_text(dir + "/rank_1.json", dump(1, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""}, {3, "started", kAr3, 900, 0, ""}}));
  report = analyze(dir);
  EXPECT_EQ(report.find("behind"), std::string::npos) << report;
  EXPECT_NE(report.find("    waiting in it: ranks [0, 1, 2]\n"), std::string::npos) << report;
}

// The same hang, with the launcher's record saying that it saw rank 1 stopped by job
// control (SIGSTOP) for 22 s when it stopped the job: analyze says so plainly, instead of
// its guess from the times ("stopped, or busy in the program").
TEST(DumpAnalysis, ARankTheLauncherSawStoppedIsNamedStopped) {
  const std::string dir = fresh_dir("stopped_per_launcher");
  write_text(dir + "/rank_0.json", dump(0, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""}, {3, "started", kAr3, 12, 0, ""}}));
  write_text(dir + "/rank_1.json", dump(1, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""}, {3, "started", kAr3, 23012, 0, ""}}));
  write_text(dir + "/rank_2.json", dump(2, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""}, {3, "started", kAr3, 14, 0, ""}}));
  auto rank = [](int r, const std::string& stop) {
    return "{\"rank\":" + std::to_string(r) + ",\"ended\":\"signal SIGTERM\",\"signal\":\"SIGTERM\","
           "\"stopped_by_launcher\":true,\"failed\":false" + stop + "}";
  };
  write_text(dir + "/launcher_node0.json",
             "{\"format\":\"distcomm-launcher-record\",\"version\":1,\"run_id\":\"r1\",\"restart\":0,"
             "\"node_rank\":0,\"time_ns\":" + std::to_string(kT0 + 31 * kSecond) +
             ",\"exit_code\":143,\"interrupted_by\":\"SIGTERM\",\"first_failure\":null,\"ranks\":[" + rank(0, "") +
             "," + rank(1, ",\"job_control_stop\":{\"since_ns\":" + std::to_string(kT0 + 1 * kSecond) +
                          ",\"seen_ns\":" + std::to_string(kT0 + 23 * kSecond) + "}") +
             "," + rank(2, "") + "]}\n");
  const std::string report = analyze(dir);
  EXPECT_NE(report.find("): likely the cause, late: stopped (SIGSTOP/frozen) per the launcher, for at least 22.0 s "
                        "(seen so from "),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("busy in the program"), std::string::npos) << report;
  EXPECT_NE(report.find("launcher: exit code 143, interrupted by SIGTERM; rank 1 was stopped (SIGSTOP/frozen) per the "
                        "launcher, for at least 22.0 s"),
            std::string::npos)
      << report;
  // A rank that never issued the op at all (stopped before it): named stopped too.
  write_text(dir + "/rank_1.json", dump(1, "SIGTERM", {{2, "completed", kAr2, 10, 11, ""}}));
  const std::string never = analyze(dir);
  EXPECT_NE(never.find("    behind: rank 1 never issued all_reduce #3 float32[4] sum\n"
                       "    rank 1 was stopped (SIGSTOP/frozen) per the launcher, for at least 22.0 s (seen so from "),
            std::string::npos)
      << never;
}

}  // namespace
}  // namespace trace
}  // namespace distcomm
