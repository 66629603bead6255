// The launcher while nobody reads its stdout (a paused `| less`, a stuck log shipper): the
// test holds the read end of the launcher's stdout pipe and does not read it. A rank's
// failure and a signal must still stop the job within the grace period, as they do with a
// reader; the output waits for the reader and none of it is lost.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

// A launcher whose stdout is a pipe that nobody reads until drain(), and whose stderr is a
// file the test can look at meanwhile.
class StalledLauncher {
 public:
  StalledLauncher(const std::vector<std::string>& argv, const std::string& err_path)
      : err_path_(err_path), launcher_(std::in_place, argv, std::vector<std::string>{}, StderrToFile{err_path}) {}
  ~StalledLauncher() {
    launcher_.reset();  // kills its process group if it still runs: its ranks die with it
    no_orphan_running();
  }

  pid_t pid() const { return launcher_->pid(); }
  std::string err() const { return read_file(err_path_); }

  // Waits until the stdout pipe is full: from then on the launcher's writes to it would block.
  bool wait_until_stalled(milliseconds deadline) {
    return wait_for(deadline, [&] { return launcher_->stdout_unread() >= 60000; });
  }

  // Reads stdout to its end (the launcher then exits), waits for the launcher; its exit code,
  // -1 at the deadline.
  int drain(milliseconds deadline, std::string* out) {
    const Finished f = launcher_->finish(deadline);
    *out = f.out;
    return shell_exit_code(f);
  }

  template <typename Done>
  static bool wait_for(milliseconds deadline, Done done) {
    for (const auto until = Clock::now() + deadline; Clock::now() < until;) {
      if (done()) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return done();
  }

 private:
  std::string err_path_;
  std::optional<Subprocess> launcher_;
};

// The pid a rank wrote to <name>_<rank> in the test's folder (0 until it did).
pid_t pid_in(const std::string& name, int rank) {
  const std::string text = read_file(temp_path(name + "_" + std::to_string(rank)));
  return text.empty() || text.back() != '\n' ? 0 : std::stoi(text);
}

// A rank that writes its pid (then that of `yes`, which it becomes) and floods stdout;
// ignoring SIGTERM if asked, so that only the grace period's SIGKILL ends it.
std::string flood(const std::string& name, bool ignore_term) {
  return std::string(ignore_term ? "trap '' TERM; " : "") + "echo $$ > \"$TEST_TMPDIR/" + name +
         "_$RANK.tmp\"; mv \"$TEST_TMPDIR/" + name + "_$RANK.tmp\" \"$TEST_TMPDIR/" + name +
         "_$RANK\"; exec yes flood";
}

// Every line is a whole line of rank 0's or rank 1's flood: nothing mixed or cut.
void expect_whole_flood_lines(const std::string& out) {
  for (const std::string& line : lines_of(out)) {
    ASSERT_TRUE(line == "[rank 0] flood" || line == "[rank 1] flood") << "a cut or mixed line: " << line;
  }
}

// How long the launcher may take to stop its ranks beyond the grace period on a loaded
// machine; without the fix it never does while stdout is not read.
constexpr milliseconds kSlack{6000};

TEST(StalledOutput, ARankFailureStopsTheJobWhileNobodyReadsStdout) {
  const std::string script = "if [ \"$RANK\" = 1 ]; then "
                             "while [ ! -e \"$TEST_TMPDIR/fail_$RANK\" ]; do sleep 0.05; done; exit 5; fi; " +
                             flood("failing_job", /*ignore_term=*/true);
  ::unlink(temp_path("fail_1").c_str());
  StalledLauncher l(launch({"--nproc_per_node=2", "--grace_period_s=1"}, {"sh", "-c", script}),
                    temp_path("failing_job.err"));
  ASSERT_TRUE(StalledLauncher::wait_for(seconds(10), [] { return pid_in("failing_job", 0) > 0; })) << l.err();
  const pid_t flooding = pid_in("failing_job", 0);
  ASSERT_TRUE(l.wait_until_stalled(seconds(10))) << "rank 0 never filled the launcher's stdout";
  std::ofstream(temp_path("fail_1")).close();  // rank 1 exits 5 now
  const auto failed_at = Clock::now();

  // Rank 0 ignores SIGTERM: the SIGKILL after the 1 s grace period ends it, and the launcher
  // reaps it, all while its stdout is still not read.
  EXPECT_TRUE(StalledLauncher::wait_for(seconds(1) + kSlack, [&] { return !process_exists(flooding); }))
      << "the flooding rank still runs (or was not reaped) "
      << std::chrono::duration_cast<milliseconds>(Clock::now() - failed_at).count()
      << " ms after rank 1 failed; the launcher said:\n"
      << l.err();
  const std::string err = l.err();
  EXPECT_TRUE(std::regex_search(err, std::regex(R"(launch: rank 1 \(local rank 1, pid \d+\) failed: exit code 5\n)")))
      << err;
  EXPECT_NE(err.find("rank 1 failed: stopping 1 rank (SIGTERM, then SIGKILL after 1s)"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 0 is still running: SIGKILL"), std::string::npos) << err;

  // The reader comes back: what was held back comes out whole, then the launcher's last line.
  std::string out;
  EXPECT_EQ(l.drain(seconds(10), &out), 5) << l.err();
  EXPECT_GT(out.size(), 60000u);
  expect_whole_flood_lines(out);
  EXPECT_TRUE(std::regex_search(l.err(), std::regex(R"(failed first \(exit code 5\)\n$)"))) << l.err();
}

TEST(StalledOutput, SigtermStopsTheJobWhileNobodyReadsStdout) {
  // Rank 0 ignores SIGTERM (the grace period's SIGKILL ends it), rank 1 does not.
  const std::string script = "if [ \"$RANK\" = 0 ]; then " + flood("signalled_job", true) + "; else " +
                             flood("signalled_job", false) + "; fi";
  StalledLauncher l(launch({"--nproc_per_node=2", "--grace_period_s=1"}, {"sh", "-c", script}),
                    temp_path("signalled_job.err"));
  ASSERT_TRUE(StalledLauncher::wait_for(
      seconds(10), [] { return pid_in("signalled_job", 0) > 0 && pid_in("signalled_job", 1) > 0; }))
      << l.err();
  const std::vector<pid_t> ranks = {pid_in("signalled_job", 0), pid_in("signalled_job", 1)};
  ASSERT_TRUE(l.wait_until_stalled(seconds(10))) << "the ranks never filled the launcher's stdout";
  const auto signalled_at = Clock::now();
  ASSERT_EQ(::kill(l.pid(), SIGTERM), 0);

  EXPECT_TRUE(StalledLauncher::wait_for(seconds(1) + kSlack, [&] {
    return !process_exists(ranks[0]) && !process_exists(ranks[1]);
  })) << "a rank still runs (or was not reaped) "
      << std::chrono::duration_cast<milliseconds>(Clock::now() - signalled_at).count()
      << " ms after the launcher got SIGTERM; the launcher said:\n"
      << l.err();
  const std::string err = l.err();
  EXPECT_NE(err.find("launch: got SIGTERM: stopping 2 ranks (SIGTERM, then SIGKILL after 1s)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("rank 0 is still running: SIGKILL"), std::string::npos) << err;

  std::string out;
  EXPECT_EQ(l.drain(seconds(10), &out), 128 + SIGTERM) << l.err();
  expect_whole_flood_lines(out);
}

// A reader that is merely slow loses nothing: the ranks print far more than the pipes and
// the launcher hold, wait while the reader does not read, and every line comes out whole
// and in each rank's order, also what they printed just before they exited.
TEST(StalledOutput, ASlowReaderGetsEveryLine) {
  const int kLines = 6000;  // ~1.4 MB of stdout per rank: more than the launcher holds
  StalledLauncher l(launch({"--nproc_per_node=2"}, {rank_probe_path(), "lines", std::to_string(kLines)}),
                    temp_path("slow_reader.err"));
  ASSERT_TRUE(l.wait_until_stalled(seconds(10)));
  std::this_thread::sleep_for(milliseconds(1500));  // longer than the launcher's drain after the ranks' exit
  std::string out;
  ASSERT_EQ(l.drain(seconds(20), &out), 0) << l.err();
  std::map<int, int> next;  // by rank: the number of its next line
  const std::regex line(R"(\[rank (\d)\] rank (\d) line (\d+) x+)");
  for (const std::string& text : lines_of(out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(text, m, line)) << "a cut or mixed line: " << text.substr(0, 80);
    const int rank = std::stoi(m[1]);
    ASSERT_EQ(m[1], m[2]) << text.substr(0, 80);
    ASSERT_EQ(std::stoi(m[3]), next[rank]++) << "a line lost or out of order: " << text.substr(0, 80);
  }
  EXPECT_EQ(next[0], kLines);
  EXPECT_EQ(next[1], kLines);
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
