// Every launcher whose ranks exited 0 ends with one line saying so (job_outcome.h), and
// says "the job succeeded" only where it knows: node 0's launcher of a static job once every
// other machine's said its ranks exited 0, never another machine's (node 0's ranks may still
// fail). Node 0's waits for the others' word at most --other_machines_wait_s, store farewell
// included, and a Ctrl-C ends that wait: it says why at once, tells the other machines to
// stop, and ends naming each as it stood after the telling. Real launchers, real ranks (shell
// commands), on this host as two machines (four in one test).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "tests/tools/launch/launcher_harness.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

const std::vector<std::string> kEnv = {"DISTCOMM_STORE_TOKEN=last-line-test-token", "DISTCOMM_RUN_ID=last-line-test"};

std::string last_line(const std::string& text) {
  const std::vector<std::string> lines = lines_of(text);
  return lines.empty() ? "" : lines.back();
}

std::unique_ptr<Subprocess> node(int node_rank, int nproc, int port, const std::vector<std::string>& extra,
                                 const std::string& script, int nnodes = 2) {
  std::vector<std::string> flags = {"--nnodes=" + std::to_string(nnodes), "--node_rank=" + std::to_string(node_rank),
                                    "--nproc_per_node=" + std::to_string(nproc), "--master_port=" + std::to_string(port)};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return std::make_unique<Subprocess>(launch(flags, {"/bin/sh", "-c", script}), kEnv, /*merge_stderr=*/true);
}

// Both launchers of a static job whose ranks exit 0 end with one line, each naming its own
// ranks and machine; node 0's, which heard node 1's end, says the job succeeded.
TEST(LastLine, EveryLauncherOfAStaticJobThatSucceededSaysSo) {
  const int port = local::pick_free_port();
  std::unique_ptr<Subprocess> n0 = node(0, 2, port, {}, "exit 0");
  std::unique_ptr<Subprocess> n1 = node(1, 2, port, {}, "exit 0");
  const Finished f0 = n0->finish(seconds(60));
  const Finished f1 = n1->finish(seconds(60));
  EXPECT_EQ(exit_code(f0), 0) << f0.out;
  EXPECT_EQ(exit_code(f1), 0) << f1.out;
  EXPECT_TRUE(std::regex_match(
      last_line(f0.out),
      std::regex(R"(launch: the job succeeded: ranks 0-1 of 4 on this machine \(node 0 of 2\) exited 0 after \d+\.\d s)")))
      << f0.out;
  EXPECT_TRUE(std::regex_match(
      last_line(f1.out),
      std::regex(R"(launch: ranks 2-3 of 4 on this machine \(node 1 of 2\) exited 0 after \d+\.\d s)")))
      << f1.out;
  EXPECT_TRUE(no_orphan_running());
}

// A fault-tolerant job's configuration (--on_failure=continue --replace_after_s): node 1's
// launcher and its rank are SIGKILLed (the machine is lost); node 0's rank goes on and exits
// 0. Node 0's launcher exits 0, its last line naming the machine lost: which node, its
// ranks, host and launcher pid, and when it was last seen.
TEST(LastLine, ALauncherWhoseJobWentOnWithoutALostMachineNamesIt) {
  const int port = local::pick_free_port();
  const std::string go_on = temp_path("node1_lost");
  const std::vector<std::string> ft = {"--on_failure=continue", "--replace_after_s=1"};
  // Node 0's rank ends (0) once the test has killed node 1: a file, waited for 60 s at most.
  std::unique_ptr<Subprocess> n0 =
      node(0, 1, port, ft, "for i in $(seq 1200); do [ -e '" + go_on + "' ] && exit 0; sleep 0.05; done; exit 1");
  std::unique_ptr<Subprocess> n1 = node(1, 1, port, ft, "echo ready $$; exec sleep 300");
  ASSERT_TRUE(n1->wait_for_stdout("ready ", 1, seconds(60))) << n1->stdout_so_far();
  std::smatch rank_pid;
  const std::string so_far = n1->stdout_so_far();
  ASSERT_TRUE(std::regex_search(so_far, rank_pid, std::regex(R"(ready (\d+))"))) << so_far;
  const pid_t launcher1 = n1->pid();
  // The whole machine: its launcher and its rank (which leads its own process group).
  n1->send_signal(SIGKILL);
  ::kill(-std::stoi(rank_pid[1].str()), SIGKILL);
  const Finished gone = n1->finish(seconds(30));
  std::ofstream(go_on) << "go on";
  const Finished f0 = n0->finish(seconds(90));
  EXPECT_EQ(exit_code(f0), 0) << f0.out;
  const std::string expected = R"(launch: the job succeeded: rank 0 of 2 on this machine \(node 0 of 2\) exited 0 after \d+\.\d s; )"
                               R"(it went on after node 1 \(rank 1 on [^,]+, launcher pid )" +
                               std::to_string(launcher1) +
                               R"(\) was lost: its launcher went silent without saying that its ranks ended, )"
                               R"(last seen \d+\.\d s into the job)";
  EXPECT_TRUE(std::regex_match(last_line(f0.out), std::regex(expected))) << f0.out;
  EXPECT_TRUE(no_orphan_running());
}

// Node 0's rank exits 0 at once, node 1's fails 3 s later: node 0's launcher must not say
// the job succeeded (before: it did, since node 1's launcher had said "its ranks failed",
// which counted as an end like any other).
TEST(LastLine, Node0NamesAnotherMachineWhoseRanksFailed) {
  const int port = local::pick_free_port();
  std::unique_ptr<Subprocess> n0 = node(0, 1, port, {}, "exit 0");
  std::unique_ptr<Subprocess> n1 = node(1, 1, port, {}, "sleep 3; exit 1");
  const Finished f0 = n0->finish(seconds(90));
  const Finished f1 = n1->finish(seconds(60));
  EXPECT_EQ(exit_code(f1), 1) << f1.out;
  EXPECT_EQ(exit_code(f0), 0) << f0.out;  // this machine's ranks did exit 0
  EXPECT_TRUE(std::regex_match(last_line(f0.out),
                               std::regex(R"(launch: rank 0 of 2 on this machine \(node 0 of 2\) exited 0 after \d+\.\d s; )"
                                          R"(node 1's ranks failed \(rank 1 on [^,]+, launcher pid \d+\))")))
      << f0.out;
  EXPECT_EQ(f0.out.find("succeeded"), std::string::npos) << f0.out;
  EXPECT_TRUE(no_orphan_running());
}

// Node 1's rank exits 0 at once, node 0's fails 3 s later: node 1's launcher says what is
// true of its machine, not that the job succeeded (before: "the job succeeded", exit 0).
TEST(LastLine, AnotherMachinesLauncherClaimsNothingAboutTheJob) {
  const int port = local::pick_free_port();
  std::unique_ptr<Subprocess> n0 = node(0, 1, port, {}, "sleep 3; exit 1");
  std::unique_ptr<Subprocess> n1 = node(1, 1, port, {}, "exit 0");
  const Finished f1 = n1->finish(seconds(60));
  const Finished f0 = n0->finish(seconds(90));
  EXPECT_EQ(exit_code(f0), 1) << f0.out;
  EXPECT_TRUE(std::regex_match(
      last_line(f1.out), std::regex(R"(launch: rank 1 of 2 on this machine \(node 1 of 2\) exited 0 after \d+\.\d s)")))
      << f1.out;
  EXPECT_EQ(f1.out.find("succeeded"), std::string::npos) << f1.out;
  EXPECT_TRUE(no_orphan_running());
}

// Node 1's rank legitimately runs past node 0's wait (--other_machines_wait_s=3): node 0's
// launcher ends within that one bound (roll call and store farewell together; before: 30 s
// each), says once how long it kept the store, and that node 1's ranks were still running,
// not that the job succeeded.
TEST(LastLine, Node0SaysWhichMachinesRanksStillRanWhenItStoppedWaiting) {
  const int port = local::pick_free_port();
  const std::string go_on = temp_path("node1_may_end_" + std::to_string(port));
  std::unique_ptr<Subprocess> n0 = node(0, 1, port, {"--other_machines_wait_s=3"}, "exit 0");
  std::unique_ptr<Subprocess> n1 =
      node(1, 1, port, {}, "for i in $(seq 1200); do [ -e '" + go_on + "' ] && exit 0; sleep 0.05; done; exit 0");
  const auto began = std::chrono::steady_clock::now();
  const Finished f0 = n0->finish(seconds(60));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::ofstream(go_on) << "go on";
  const Finished f1 = n1->finish(seconds(60));
  EXPECT_EQ(exit_code(f0), 0) << f0.out;
  EXPECT_LT(took, 20.0) << f0.out;  // 3 s, plus starting: a generous margin, far under 30 s
  EXPECT_TRUE(std::regex_match(
      last_line(f0.out),
      std::regex(R"(launch: rank 0 of 2 on this machine \(node 0 of 2\) exited 0 after \d+\.\d s; node 1's ranks were )"
                 R"(still running when this launcher stopped waiting for them \(rank 1 on [^,]+, launcher pid \d+\))")))
      << f0.out;
  const std::regex kept(R"(launch: kept the job's store \d+\.\d s after this machine's ranks ended, until the other )"
                        R"(machines left it \(at most 3 s\))");
  const std::vector<std::string> lines = lines_of(f0.out);
  int kept_lines = 0;
  for (const std::string& line : lines) kept_lines += line.find("kept the job's store") != std::string::npos;
  EXPECT_EQ(kept_lines, 1) << f0.out;
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return std::regex_match(l, kept); }))
      << f0.out;
  EXPECT_EQ(f0.out.find("succeeded"), std::string::npos) << f0.out;
  (void)f1;  // node 1's launcher lost node 0's store meanwhile: not what this test checks
  EXPECT_TRUE(no_orphan_running());
}

// Ctrl-C to node 0's launcher while it waits for node 1's (whose rank runs on): it ends at
// once with exit 130, saying so, without keeping the store (before: SIGINT was swallowed, and
// the launcher exited 0 a minute later saying the job succeeded).
TEST(LastLine, CtrlCEndsNode0sWaitForTheOtherMachines) {
  const int port = local::pick_free_port();
  const std::string go_on = temp_path("node1_may_end_ctrl_c_" + std::to_string(port));
  std::unique_ptr<Subprocess> n0 = node(0, 1, port, {}, "exit 0");
  std::unique_ptr<Subprocess> n1 =
      node(1, 1, port, {}, "for i in $(seq 1200); do [ -e '" + go_on + "' ] && exit 0; sleep 0.05; done; exit 0");
  const bool waiting = n0->wait_for_stdout("for the other machines' launchers to say how their ranks ended", 1, seconds(60));
  n0->send_signal(SIGINT);
  const auto sent = std::chrono::steady_clock::now();
  const Finished f0 = n0->finish(seconds(60));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  std::ofstream(go_on) << "go on";
  const Finished f1 = n1->finish(seconds(60));
  ASSERT_TRUE(waiting) << f0.out;
  EXPECT_EQ(exit_code(f0), 130) << f0.out;
  EXPECT_LT(took, 10.0) << f0.out;  // at once; a generous margin for a loaded machine
  // Why first (the line at once), then what node 1 did with the stop, as read after it was
  // told (node 1 reads it at its next beat; "never checked in" only where its launcher had not
  // started 5 s into node 0's attempt, on a loaded machine).
  EXPECT_TRUE(std::regex_search(
      f0.out, std::regex(R"(launch: got SIGINT from pid \d+ \([^)]*\) while waiting for the other machines' launchers )"
                         R"(to say how their ranks ended: this machine's rank 0 had exited 0; telling the other )"
                         R"(machines' launchers to stop their ranks\n(?:.*\n)*launch: told the other machines' )")))
      << f0.out;
  EXPECT_TRUE(std::regex_match(
      last_line(f0.out),
      std::regex(R"(launch: told the other machines' launchers to stop their ranks: node 1(?: read it \(rank 1 on [^,]+, )"
                 R"(launcher pid \d+\)|'s launcher never checked in); exit status 130 \(128 \+ 2\))")))
      << f0.out;
  EXPECT_EQ(f0.out.find("kept the job's store"), std::string::npos) << f0.out;
  EXPECT_EQ(f0.out.find("succeeded"), std::string::npos) << f0.out;
  (void)f1;
  EXPECT_TRUE(no_orphan_running());
}

// A scheduler's SIGTERM to node 0's launcher while it waits for node 1's (whose rank runs
// on): node 0's launcher leaves the job's stop in its store, node 1's reads it, stops its
// rank, says why in one line and exits as a stopped job (before: node 0's launcher went
// away and node 1's rank ran on, its job's store gone).
TEST(LastLine, AStopOfNode0WhileItWaitsStopsTheOtherMachinesRanks) {
  const int port = local::pick_free_port();
  std::unique_ptr<Subprocess> n0 = node(0, 1, port, {}, "exit 0");
  // 30 s at the least: far longer than the stop should take.
  std::unique_ptr<Subprocess> n1 =
      node(1, 1, port, {"--grace_period_s=5"}, "for i in $(seq 600); do sleep 0.05; done; exit 0");
  const bool waiting = n0->wait_for_stdout("for the other machines' launchers to say how their ranks ended", 1, seconds(60));
  // Twice, as a signal to the process group and a wrapper forwarding it deliver it: the
  // repeat must not end node 0's wait for the others to read the stop (it did: node 1's
  // rank ran on, the review of e258281).
  // (Apart: two at once are one pending signal. Node 1 reads the stop at its next beat, a
  // second away, so 0.1 s lands the repeat inside node 0's wait.)
  n0->send_signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  n0->send_signal(SIGTERM);
  const auto sent = std::chrono::steady_clock::now();
  const Finished f0 = n0->finish(seconds(60));
  const Finished f1 = n1->finish(seconds(90));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  ASSERT_TRUE(waiting) << f0.out;
  EXPECT_EQ(exit_code(f0), 128 + SIGTERM) << f0.out;
  EXPECT_TRUE(std::regex_match(last_line(f0.out),
                               std::regex(R"(launch: told the other machines' launchers to stop their ranks: node 1 read )"
                                          R"(it \(rank 1 on [^,]+, launcher pid \d+\); exit status 143 \(128 \+ 15\))")))
      << f0.out;
  ASSERT_FALSE(f1.timed_out) << f1.out;
  EXPECT_LT(took, 20.0) << f1.out;  // ~2 s; the rank alone would have run 30 s
  EXPECT_EQ(exit_code(f1), 128 + SIGTERM) << f1.out;
  EXPECT_NE(f1.out.find("launch: node 0's launcher stopped the job (node 0's launcher got SIGTERM from pid " +
                        std::to_string(::getpid())),
            std::string::npos)
      << f1.out;
  EXPECT_NE(f1.out.find("): stopping 1 rank (SIGTERM"), std::string::npos) << f1.out;
  EXPECT_TRUE(std::regex_match(
      last_line(f1.out),
      std::regex(R"(launch: the job was stopped on node 0: node 0's launcher got SIGTERM from pid \d+ \([^)]*\) from )"
                 R"(outside \(a scheduler's cancel, preemption or eviction, or a kill\) while it waited for the other )"
                 R"(machines' ranks to end \(its own had exited 0\), not by a failure: no rank failed on its own; rank 1 )"
                 R"((?:got SIGTERM from outside too|was stopped by this machine's launcher); exit status 143 \(128 \+ 15\))")))
      << f1.out;
  EXPECT_TRUE(no_orphan_running());
}

// Node 0's launcher is stopped while it waits, before node 1's launcher has checked in; node
// 1's starts then and reads the stop. Node 0's last line says so: it reads the other
// machines' state after telling them, not before (it said "node 1's launcher had not checked
// in", though node 1 had just read the stop and stopped its rank). And the line saying why
// comes first, before the one saying what the telling did (they came the other way round).
TEST(LastLine, Node0NamesAMachineThatReadTheStopAsSuchThoughItCheckedInAfterTheSignal) {
  const int port = local::pick_free_port();
  std::unique_ptr<Subprocess> n0 = node(0, 1, port, {}, "exit 0");
  ASSERT_TRUE(n0->wait_for_stdout("for the other machines' launchers to say how their ranks ended", 1, seconds(60)))
      << n0->stdout_so_far();
  n0->send_signal(SIGTERM);
  // Node 0's line at once: node 1's launcher has not started yet.
  ASSERT_TRUE(n0->wait_for_stdout("; telling the other machines' launchers to stop their ranks", 1, seconds(30)))
      << n0->stdout_so_far();
  // Node 0 waits for node 1 to read the stop until node 1 has been silent 5 s into node 0's
  // attempt: node 1's launcher checks in and reads it at its first beat, well within that.
  std::unique_ptr<Subprocess> n1 = node(1, 1, port, {}, "for i in $(seq 600); do sleep 0.05; done; exit 0");
  const Finished f0 = n0->finish(seconds(60));
  const Finished f1 = n1->finish(seconds(90));
  EXPECT_EQ(exit_code(f0), 128 + SIGTERM) << f0.out;
  EXPECT_EQ(exit_code(f1), 128 + SIGTERM) << f1.out;
  EXPECT_NE(f1.out.find("launch: node 0's launcher stopped the job (node 0's launcher got SIGTERM"), std::string::npos)
      << f1.out;
  const std::vector<std::string> lines = lines_of(f0.out);
  ASSERT_GE(lines.size(), 2u) << f0.out;
  EXPECT_TRUE(std::regex_match(lines[lines.size() - 2],
                               std::regex(R"(launch: got SIGTERM from pid \d+ \([^)]*\) while waiting for the other )"
                                          R"(machines' launchers to say how their ranks ended: this machine's rank 0 had )"
                                          R"(exited 0; telling the other machines' launchers to stop their ranks)")))
      << f0.out;
  EXPECT_TRUE(std::regex_match(last_line(f0.out),
                               std::regex(R"(launch: told the other machines' launchers to stop their ranks: node 1 read )"
                                          R"(it \(rank 1 on [^,]+, launcher pid )" +
                                          std::to_string(n1->pid()) + R"(\); exit status 143 \(128 \+ 15\))")))
      << f0.out;
  EXPECT_EQ(f0.out.find("had not checked in"), std::string::npos) << f0.out;
  EXPECT_TRUE(no_orphan_running());
}

// Node 0's last line after the stop names each other machine as it was: node 1's launcher
// had ended (its rank exited 0 before the stop), node 2's read the stop, node 3's never
// came (before: "each has read it, had ended, or fell silent", about them all together).
TEST(LastLine, Node0SaysForEachOtherMachineWhetherItReadTheStopHadEndedOrNeverCame) {
  const int port = local::pick_free_port();
  std::unique_ptr<Subprocess> n0 = node(0, 1, port, {}, "exit 0", /*nnodes=*/4);
  std::unique_ptr<Subprocess> n1 = node(1, 1, port, {}, "exit 0", 4);
  std::unique_ptr<Subprocess> n2 = node(2, 1, port, {}, "echo ready; for i in $(seq 600); do sleep 0.05; done; exit 0", 4);
  // Node 1's launcher has said how its ranks ended (it exits right after) and node 2's rank
  // runs, before node 0's launcher is stopped.
  const Finished f1 = n1->finish(seconds(60));
  EXPECT_EQ(exit_code(f1), 0) << f1.out;
  ASSERT_TRUE(n2->wait_for_stdout("ready", 1, seconds(60))) << n2->stdout_so_far();
  ASSERT_TRUE(n0->wait_for_stdout("for the other machines' launchers to say how their ranks ended", 1, seconds(60)))
      << n0->stdout_so_far();
  n0->send_signal(SIGTERM);
  const Finished f0 = n0->finish(seconds(60));
  const Finished f2 = n2->finish(seconds(90));
  EXPECT_EQ(exit_code(f0), 128 + SIGTERM) << f0.out;
  EXPECT_EQ(exit_code(f2), 128 + SIGTERM) << f2.out;
  EXPECT_TRUE(std::regex_match(
      last_line(f0.out),
      std::regex(R"(launch: told the other machines' launchers to stop their ranks: node 1 had ended: its ranks )"
                 R"(exited 0 \(rank 1 on [^,]+, launcher pid )" +
                 std::to_string(n1->pid()) + R"(\); node 2 read it \(rank 2 on [^,]+, launcher pid )" +
                 std::to_string(n2->pid()) + R"(\); node 3's launcher never checked in; exit status 143 \(128 \+ 15\))")))
      << f0.out;
  EXPECT_TRUE(no_orphan_running());
}

// Node 1's launcher is SIGSTOPped (a frozen container, a debugger) while node 0's launcher,
// waiting for it, is stopped: node 0 leaves the job's stop, waits its 5 s for node 1 to read
// it, and ends. Continued, node 1's launcher finds node 0's store gone. It retried its beats
// for ever, and its rank ran on (40 s and more, the review's timeout); now once node 0's
// store has answered none of its beats for the roll call's silence (5 s, as long as node 0
// takes a silent machine for lost), it stops its rank and ends, saying so, exit 143.
TEST(LastLine, ALauncherThatWasStoppedThroughNode0sStopEndsItsRanksOnceNode0sStoreIsGone) {
  const int port = local::pick_free_port();
  std::unique_ptr<Subprocess> n0 = node(0, 1, port, {}, "exit 0");
  // 120 s at the least: far longer than the stop should take.
  std::unique_ptr<Subprocess> n1 =
      node(1, 1, port, {"--grace_period_s=5"}, "echo ready $$; for i in $(seq 2400); do sleep 0.05; done; exit 0");
  ASSERT_TRUE(n1->wait_for_stdout("ready ", 1, seconds(60))) << n1->stdout_so_far();
  std::smatch rank_pid;
  const std::string so_far = n1->stdout_so_far();
  ASSERT_TRUE(std::regex_search(so_far, rank_pid, std::regex(R"(ready (\d+))"))) << so_far;
  ASSERT_TRUE(n0->wait_for_stdout("for the other machines' launchers to say how their ranks ended", 1, seconds(60)))
      << n0->stdout_so_far();
  n1->send_signal(SIGSTOP);  // its launcher only: the rank leads a process group of its own
  n0->send_signal(SIGTERM);
  const Finished f0 = n0->finish(seconds(60));
  EXPECT_EQ(exit_code(f0), 128 + SIGTERM) << f0.out;
  n1->send_signal(SIGCONT);
  const auto continued = std::chrono::steady_clock::now();
  const Finished f1 = n1->finish(seconds(40));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - continued).count();
  if (f1.timed_out) ::kill(-std::stoi(rank_pid[1].str()), SIGKILL);  // the old code's rank, left running
  ASSERT_FALSE(f1.timed_out) << "node 1's rank ran on after node 0's launcher had gone\n" << f1.out;
  // 5 s of failed beats (a second each to find the store refusing, a second apart), the
  // rank's SIGTERM: ~8 s; a margin for a loaded machine.
  EXPECT_LT(took, 25.0) << f1.out;
  EXPECT_EQ(exit_code(f1), 128 + SIGTERM) << f1.out;
  const std::string gone = R"(node 0's launcher ended or was lost: its store at [^ ]+:)" + std::to_string(port) +
                           R"( has not answered this launcher's beats for (\d+)\.\d s \(TCPStore: [^\n]*\))";
  std::smatch said;
  // This launcher's own words, alone: node 0's launcher stopped nothing that it knows of.
  ASSERT_TRUE(std::regex_search(f1.out, said, std::regex(R"((?:^|\n)launch: )" + gone + R"(: stopping 1 rank \(SIGTERM)")))
      << f1.out;
  EXPECT_GE(std::stoi(said[1].str()), 5) << f1.out;  // not before the roll call's silence
  EXPECT_TRUE(std::regex_match(last_line(f1.out), std::regex("launch: " + gone + R"(, not by a failure: [^\n]*)"
                                                                              R"(exit status 143 \(128 \+ 15\))")))
      << f1.out;
  EXPECT_EQ(f1.out.find("stopped the job"), std::string::npos) << f1.out;
  EXPECT_EQ(f1.out.find("the job was stopped on node 0"), std::string::npos) << f1.out;
  EXPECT_EQ(f1.out.find("has left the job"), std::string::npos) << f1.out;  // no farewell: node 0 was stopped
  EXPECT_TRUE(no_orphan_running());
}

// Node 0's rank exits 0 at once; node 1's runs on ~12 s (an evaluation, a checkpoint's
// write), past node 0's wait (--other_machines_wait_s=2). Node 0's launcher stops waiting,
// exits 0 and its store goes with it, as torchrun's agent lets such workers finish. Before,
// node 1's launcher took node 0 for lost once its beats had failed for 5 s and stopped its
// rank (exit 143); node 0's farewell (launch/node0_left, read at a beat before its store
// went) now tells it that node 0 left on purpose: its rank runs to its end, and its launcher
// says once that node 0's launcher left, then reports how its rank ended (exit 0).
TEST(LastLine, AnotherMachinesRanksRunToTheirEndAfterNode0sLauncherStoppedWaitingForThem) {
  const int port = local::pick_free_port();
  std::unique_ptr<Subprocess> n0 = node(0, 1, port, {"--other_machines_wait_s=2"}, "exit 0");
  std::unique_ptr<Subprocess> n1 =
      node(1, 1, port, {}, "echo ready $$; for i in $(seq 240); do sleep 0.05; done; echo rank 1 done; exit 0");
  ASSERT_TRUE(n1->wait_for_stdout("ready ", 1, seconds(60))) << n1->stdout_so_far();
  std::smatch rank_pid;
  const std::string so_far = n1->stdout_so_far();
  ASSERT_TRUE(std::regex_search(so_far, rank_pid, std::regex(R"(ready (\d+))"))) << so_far;
  const Finished f0 = n0->finish(seconds(60));
  EXPECT_EQ(exit_code(f0), 0) << f0.out;
  // The case at hand: node 0's launcher, and its store, gone while node 1's rank runs.
  ASSERT_EQ(n1->stdout_so_far().find("rank 1 done"), std::string::npos)
      << "node 1's rank ended before node 0's launcher did: the case was not made\n" << n1->stdout_so_far();
  const Finished f1 = n1->finish(seconds(60));
  if (f1.timed_out) ::kill(-std::stoi(rank_pid[1].str()), SIGKILL);
  ASSERT_FALSE(f1.timed_out) << f1.out;
  EXPECT_EQ(exit_code(f1), 0) << f1.out;
  EXPECT_NE(f1.out.find("rank 1 done"), std::string::npos) << "node 1's rank did not run to its end\n" << f1.out;
  EXPECT_EQ(f1.out.find("ended or was lost"), std::string::npos) << f1.out;
  const std::regex left(R"(launch: node 0's launcher has left the job \(node 0's launcher stopped waiting for the )"
                        R"(other machines' ranks 2 s after its own exited 0\); this machine's ranks run on and this )"
                        R"(launcher reports how they end)");
  const std::vector<std::string> lines = lines_of(f1.out);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return std::regex_match(l, left); }), 1)
      << f1.out;
  EXPECT_TRUE(std::regex_match(
      last_line(f1.out), std::regex(R"(launch: rank 1 of 2 on this machine \(node 1 of 2\) exited 0 after \d+\.\d s)")))
      << f1.out;
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
