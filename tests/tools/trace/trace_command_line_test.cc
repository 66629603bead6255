// tools/trace's command line, as launch's and bench's: --help and --version, exit status 2
// for a command line it cannot run (1 is for a failure to read or write), and the usage in
// the name it was run as (distcomm-trace, installed).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "api/version.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace testing {
namespace {

const std::string kTrace = runfile("tools/trace/trace");

// The trace binary as an installed copy's user runs it: <prefix>/bin/distcomm-trace.
std::string installed_trace() {
  const std::string bin = temp_path("bin");
  ::mkdir(bin.c_str(), 0755);
  const std::string path = bin + "/distcomm-trace";
  ::unlink(path.c_str());
  EXPECT_EQ(::symlink(kTrace.c_str(), path.c_str()), 0) << path;
  return path;
}

TEST(TraceCommandLine, HelpAndVersion) {
  const std::string trace = installed_trace();
  for (const char* help : {"--help", "-h"}) {
    Finished f = run({trace, help});
    EXPECT_EQ(exit_code(f), 0) << help << ": " << f.err;
    EXPECT_NE(f.out.find("usage: distcomm-trace analyze DIR "), std::string::npos) << help << ": " << f.out;
    EXPECT_NE(f.out.find("\n       distcomm-trace timeline FILE --svg OUT "), std::string::npos) << f.out;
  }
  Finished f = run({trace, "timeline", "--help"});
  EXPECT_EQ(exit_code(f), 0) << "a command's --help asks too: " << f.err;
  f = run({trace, "--version"});
  EXPECT_EQ(exit_code(f), 0) << f.err;
  EXPECT_EQ(f.out, std::string("trace (distcomm) ") + DISTCOMM_VERSION + "\n");
}

TEST(TraceCommandLine, AWrongCommandLineExitsTwoWithTheUsage) {
  const std::string trace = installed_trace();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {}, {"bogus"}, {"analyze"}, {"analyze", "a", "-q"}, {"timeline", "f.json"}, {"timeline", "--svg=x", "-q"}}) {
    std::vector<std::string> argv = {trace};
    argv.insert(argv.end(), args.begin(), args.end());
    Finished f = run(argv);
    const std::string what = args.empty() ? "(no arguments)" : args[0] + "...";
    EXPECT_EQ(exit_code(f), 2) << what << ": " << f.err;
    EXPECT_EQ(f.err.rfind("trace: ", 0), 0u) << f.err;
    EXPECT_NE(f.err.find("usage: distcomm-trace analyze DIR"), std::string::npos) << what << ": " << f.err;
  }
  // In the tree it is trace.
  Finished f = run({kTrace, "bogus"});
  EXPECT_EQ(exit_code(f), 2) << f.err;
  EXPECT_NE(f.err.find("trace: unknown command 'bogus'\nusage: trace analyze DIR"), std::string::npos) << f.err;
}

// A command line it can run that then fails (a folder that is not there) is not a usage
// error: status 1, as any program's failure under run_main.
TEST(TraceCommandLine, AFailureToReadExitsOne) {
  Finished f = run({kTrace, "analyze", temp_path("no_such_folder")});
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_NE(f.err.find("cannot open folder"), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("usage:"), std::string::npos) << f.err;
}

// One dump that is not JSON (two dumps of a rank that raced, before the fix) does not stop
// the analysis: it is named in one line, with why, the others are analysed, and the status
// is 0 with a warning on stderr. Before: exit 1, nothing analysed.
void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

TEST(TraceCommandLine, AnUnreadableDumpIsReportedAndTheRestAnalysed) {
  const std::string dir = temp_path("one_broken");
  ::mkdir(dir.c_str(), 0755);
  const std::string good =
      "{\"format\":\"distcomm-trace-dump\",\"version\":1,\"rank\":0,\"run_id\":\"r\",\"host\":\"vm\",\"pid\":7,"
      "\"reason\":\"exit\",\"time_ns\":1,\"groups\":[{\"name\":\"world\",\"rank\":0,\"size\":2,\"global_ranks\":[0,1],"
      "\"backend\":\"gloo\",\"ops\":[]}]}\n";
  write_file(dir + "/rank_0.json", good);
  write_file(dir + "/rank_1.json", good + "]}\n");
  Finished f = run({kTrace, "analyze", dir});
  EXPECT_EQ(exit_code(f), 0) << f.err;
  EXPECT_NE(f.out.find("unreadable, left out: rank_1.json: not valid JSON at byte "), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("1 dump: rank 0 "), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("trace: warning: 1 file unreadable, left out (named above)"), std::string::npos) << f.err;
}

// A job over several machines leaves a trace folder on each (tools/launch --trace_dir on
// every node): analyze reads them all as one job. Before: "analyze takes one folder", and
// the user had to merge the folders by hand.
TEST(TraceCommandLine, AnalyzeReadsOneFolderPerMachineAsOneJob) {
  auto dump = [](int rank) {
    return "{\"format\":\"distcomm-trace-dump\",\"version\":1,\"rank\":" + std::to_string(rank) +
           ",\"run_id\":\"r\",\"host\":\"h" + std::to_string(rank) + "\",\"pid\":7,\"reason\":\"exit\",\"time_ns\":1,"
           "\"groups\":[{\"name\":\"world\",\"rank\":" + std::to_string(rank) +
           ",\"size\":2,\"global_ranks\":[0,1],\"backend\":\"gloo\",\"ops\":[]}]}\n";
  };
  std::vector<std::string> dirs;
  for (int host = 0; host < 2; ++host) {
    dirs.push_back(temp_path("machine" + std::to_string(host)));
    ::mkdir(dirs.back().c_str(), 0755);
    write_file(dirs.back() + "/rank_" + std::to_string(host) + ".json", dump(host));
  }
  Finished f = run({kTrace, "analyze", dirs[0], dirs[1]});
  EXPECT_EQ(exit_code(f), 0) << f.err;
  EXPECT_NE(f.out.find("2 dumps: rank 0 (h0 "), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("rank 1 (h1 "), std::string::npos) << f.out;
  EXPECT_EQ(f.out.find("no dump from"), std::string::npos) << f.out;
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
