// Elastic jobs end to end: several real launchers on this host stand for machines, meeting
// at a rendezvous endpoint one of them serves; their ranks are real distcomm programs over
// gloo (elastic_probe) or rank_probe.
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <dirent.h>
#include <fstream>
#include <memory>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "api/process/local_processes.h"
#include "tests/tools/launch/launcher_harness.h"
#include "tests/testing/port_wait.h"

namespace distcomm {
namespace testing {
namespace {

using std::chrono::seconds;

const std::string kLaunch = launcher_path();
const std::string kElasticProbe = runfile("tests/tools/launch/elastic_probe");
const std::string kRankProbe = rank_probe_path();
const std::string kToken = "DISTCOMM_STORE_TOKEN=elastic-test-token";

const auto* const kAdoptOrphans = ::testing::AddGlobalTestEnvironment(new AdoptOrphans);

std::vector<std::string> launcher(const std::string& endpoint, const std::string& nnodes,
                                  std::vector<std::string> flags, std::vector<std::string> command) {
  std::vector<std::string> argv = {kLaunch, "--nnodes=" + nnodes, "--rdzv_endpoint=" + endpoint};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}


int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(Elastic, MachinesLeaveAndJoinAndTheJobGoesOn) {
  const int port = local::pick_free_port();
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  const std::string finish = temp_path("finish_elastic");
  auto start = [&] {
    return std::make_unique<Subprocess>(
        launcher(endpoint, "1:3",
                 // A last call long enough for all three to be in round 1 on a loaded machine
                 // (it closes as soon as the third joins; later rounds close once every
                 // launcher of the round before is back or gone).
                 {"--nproc_per_node=2", "--rdzv_id=job7", "--rdzv_last_call_s=30", "--max_restarts=3"},
                 {kElasticProbe, finish}),
        std::vector<std::string>{kToken}, /*merge_stderr=*/true);
  };
  // The first one serves the store: started first, so that the one killed below is not it.
  std::unique_ptr<Subprocess> a = start();
  ASSERT_TRUE(distcomm::testing::accepts_connections(port, seconds(30)));
  std::unique_ptr<Subprocess> b = start(), c = start();
  const std::string round1 = "launch: rendezvous 'job7' round 1: 3 machines (min 1, max 3)\n";
  for (Subprocess* p : {a.get(), b.get(), c.get()}) {
    ASSERT_TRUE(p->wait_for_stdout(round1, 1, seconds(60)));
    ASSERT_TRUE(p->wait_for_stdout(" of 6 (node ", 2, seconds(60)));
  }

  // A machine goes away: its launcher is killed (its ranks die with it).
  c->send_signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  Finished gone = c->finish(seconds(30));
  const std::string round2 = "launch: rendezvous 'job7' round 2: 2 machines (min 1, max 3)\n";
  for (Subprocess* p : {a.get(), b.get()}) {
    ASSERT_TRUE(p->wait_for_stdout(round2, 1, seconds(60)));
    ASSERT_TRUE(p->wait_for_stdout(" of 4 (node ", 2, seconds(60)));
  }
  const auto reformed = std::chrono::steady_clock::now() - killed;

  // A new machine comes: the two make room for it at the next round.
  std::unique_ptr<Subprocess> d = start();
  const std::string round3 = "launch: rendezvous 'job7' round 3: 3 machines (min 1, max 3)\n";
  for (Subprocess* p : {a.get(), b.get(), d.get()}) {
    ASSERT_TRUE(p->wait_for_stdout(round3, 1, seconds(60)));
  }
  ASSERT_TRUE(a->wait_for_stdout(" of 6 (node ", 4, seconds(60)));
  ASSERT_TRUE(b->wait_for_stdout(" of 6 (node ", 4, seconds(60)));
  ASSERT_TRUE(d->wait_for_stdout(" of 6 (node ", 2, seconds(60)));

  std::ofstream(finish) << "done";
  std::map<std::string, Finished> done;
  done["a"] = a->finish(seconds(60));
  done["b"] = b->finish(seconds(60));
  done["d"] = d->finish(seconds(60));
  for (const auto& [name, f] : done) {
    EXPECT_EQ(exit_code(f), 0) << "launcher " << name << ":\n" << f.out;
    EXPECT_EQ(count(f.out, "finished: 6 ranks"), 2) << "launcher " << name << ":\n" << f.out;
    EXPECT_EQ(count(f.out, round3), 1) << f.out;
    // Every machine, the late one too, agrees the job restarted once (the machine that
    // went away); the one that joined is no restart.
    const std::regex round3_rank(R"(joined rank \d of 6 \(node \d, restart 1\))");
    EXPECT_EQ(std::distance(std::sregex_iterator(f.out.begin(), f.out.end(), round3_rank), std::sregex_iterator()), 2)
        << f.out;
  }
  std::smatch node_of_c;
  ASSERT_TRUE(std::regex_search(gone.out, node_of_c, std::regex(R"(of 6 \(node (\d))"))) << gone.out;
  for (const std::string name : {"a", "b"}) {
    const std::string& out = done[name].out;
    EXPECT_NE(out.find("launch: rendezvous 'job7' round 1 ended: the launcher of node " + node_of_c[1].str() +
                       " (127.0.0.1) ended; restart 1 of 3\n"),
              std::string::npos)
        << "the machine that went away is the cause, not the ranks that lost it:\n" << out;
    EXPECT_NE(out.find("launch: rendezvous 'job7' round 2 ended: 1 machine waits to join\n"), std::string::npos) << out;
    EXPECT_EQ(count(out, " of 4 (node "), 2) << out;
    // Its last line: the job succeeded, and what it went on after -- the machine lost first.
    const std::vector<std::string> lines = lines_of(out);
    const std::regex last(R"(launch: the job succeeded: ranks \d-\d of 6 on this machine \(node \d of 3, rendezvous )"
                          R"(round 3\) exited 0 after \d+\.\d s and 1 restart; it went on after rendezvous 'job7' round 1 )"
                          R"(ended \d+\.\d s into the job: the launcher of node )" +
                          node_of_c[1].str() +
                          R"( \(127\.0\.0\.1\) ended; then after rendezvous 'job7' round 2 ended \d+\.\d s into the )"
                          R"(job: 1 machine waits to join)");
    EXPECT_TRUE(!lines.empty() && std::regex_match(lines.back(), last)) << out;
  }
  const std::vector<std::string> late = lines_of(done["d"].out);
  EXPECT_TRUE(!late.empty() && std::regex_match(late.back(), std::regex(R"(launch: the job succeeded: ranks \d-\d of 6 )"
                                                                        R"(on this machine \(node \d of 3, rendezvous round )"
                                                                        R"(3\) exited 0 after \d+\.\d s and 1 restart)")))
      << done["d"].out;
  EXPECT_LT(reformed, seconds(30)) << "re-forming took too long";
  std::printf("killed launcher -> 2-machine job running again: %.2f s\n",
              std::chrono::duration<double>(reformed).count());
  EXPECT_TRUE(no_orphan_running());
}

// A launcher that stops answering (SIGSTOP: its connections stay open, its heartbeat stops)
// is taken for gone within the heartbeat timeout, and the others go on without it; when it
// runs again it finds itself left out and joins at the next round.
TEST(Elastic, ASilentLauncherIsLeftOutAndComesBackAtTheNextRound) {
  const int port = local::pick_free_port();
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  const std::string finish = temp_path("finish_silent");
  auto start = [&] {
    return std::make_unique<Subprocess>(
        launcher(endpoint, "1:3", {"--rdzv_id=silent", "--rdzv_last_call_s=30", "--max_restarts=3"},
                 {kElasticProbe, finish}),
        std::vector<std::string>{kToken}, /*merge_stderr=*/true);
  };
  std::unique_ptr<Subprocess> a = start();
  ASSERT_TRUE(distcomm::testing::accepts_connections(port, seconds(30)));
  std::unique_ptr<Subprocess> b = start(), c = start();
  for (Subprocess* p : {a.get(), b.get(), c.get()}) ASSERT_TRUE(p->wait_for_stdout(" of 3 (node ", 1, seconds(60)));
  c->send_signal(SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  for (Subprocess* p : {a.get(), b.get()}) {
    ASSERT_TRUE(p->wait_for_stdout("launch: rendezvous 'silent' round 2: 2 machines (min 1, max 3)\n", 1, seconds(60)));
  }
  const auto noticed = std::chrono::steady_clock::now() - stopped;
  // Meanwhile c's rank loses its peers and fails (a PeerFailure, in its error file): once
  // continued, c sees that exit before its watch reads the round's end.
  std::this_thread::sleep_for(seconds(3));
  c->send_signal(SIGCONT);
  for (Subprocess* p : {a.get(), b.get(), c.get()}) {
    ASSERT_TRUE(p->wait_for_stdout("launch: rendezvous 'silent' round 3: 3 machines (min 1, max 3)\n", 1, seconds(60)));
  }
  std::ofstream(finish) << "done";
  for (Subprocess* p : {a.get(), b.get(), c.get()}) {
    Finished f = p->finish(seconds(60));
    EXPECT_EQ(exit_code(f), 0) << f.out;
    EXPECT_EQ(count(f.out, "finished: 3 ranks"), 1) << f.out;
    if (p != c.get()) {
      EXPECT_TRUE(std::regex_search(f.out, std::regex(R"(round 1 ended: the launcher of node \d \(127\.0\.0\.1\) went away: no heartbeat for 5s; restart 1 of 3\n)")))
          << f.out;
    }
    // The ranks that failed because the machine went away (a PeerFailure, reported before
    // the stop's SIGTERM) are its consequences: no machine names one as what failed first.
    EXPECT_EQ(f.out.find("failed first"), std::string::npos) << f.out;
  }
  // Detected through the heartbeats: 5 s after the last beat seen (up to one 0.5 s beat
  // interval before the stop), not much later.
  EXPECT_GE(noticed, std::chrono::milliseconds(4500));
  EXPECT_LT(noticed, seconds(20));
  std::printf("silent launcher -> 2-machine job running again: %.2f s\n", std::chrono::duration<double>(noticed).count());
  EXPECT_TRUE(no_orphan_running());
}

// Two machines of one elastic job ("1:2") on loopback, both in their first round: `a`
// serves the rendezvous store, `b` joins it (with b_env).
struct TwoMachines {
  std::string endpoint;
  std::unique_ptr<Subprocess> a, b;
};

void start_two_machines(TwoMachines& m, const std::string& rdzv_id, int max_restarts, const std::string& finish,
                        const std::vector<std::string>& b_env = {kToken}) {
  const int port = local::pick_free_port();
  m.endpoint = "127.0.0.1:" + std::to_string(port);
  auto args = launcher(m.endpoint, "1:2",
                       {"--rdzv_id=" + rdzv_id, "--rdzv_last_call_s=30", "--max_restarts=" + std::to_string(max_restarts)},
                       {kElasticProbe, finish});
  m.a = std::make_unique<Subprocess>(args, std::vector<std::string>{kToken}, /*merge_stderr=*/true);
  ASSERT_TRUE(distcomm::testing::accepts_connections(port, seconds(30)));
  m.b = std::make_unique<Subprocess>(args, b_env, /*merge_stderr=*/true);
  ASSERT_TRUE(m.a->wait_for_stdout(" of 2 (node ", 1, seconds(60)));
  ASSERT_TRUE(m.b->wait_for_stdout(" of 2 (node ", 1, seconds(60)));
}

// The launcher that serves the rendezvous store stops (SIGSTOP) for longer than a store
// request waits for its reply (10 s): the store does not answer, as through a network
// cut. The other launcher says so once and waits for it, with its ranks running (it ended
// for good after 10 s: a tester's network cut of 15 s), and the job goes on once the store
// answers again.
TEST(Elastic, AStoreThatDoesNotAnswerForAWhileIsWaitedFor) {
  const std::string finish = temp_path("finish_store_silent");
  TwoMachines m;
  ASSERT_NO_FATAL_FAILURE(start_two_machines(m, "storecut", 3, finish));
  Subprocess& a = *m.a;
  Subprocess& b = *m.b;
  const std::string& endpoint = m.endpoint;
  a.send_signal(SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  const std::string waits = "launch: the rendezvous store at " + endpoint + " has not answered for ";
  // Said once the first request has waited 10 s, and the launcher is still there.
  const bool said = b.wait_for_stdout(waits, 1, seconds(15));
  std::this_thread::sleep_until(stopped + seconds(15));
  a.send_signal(SIGCONT);
  ASSERT_TRUE(said) << b.stdout_so_far();
  ASSERT_TRUE(b.wait_for_stdout("launch: the rendezvous store at " + endpoint + " answers again, after ", 1, seconds(30)))
      << b.stdout_so_far();
  std::ofstream(finish) << "done";
  Finished fa = a.finish(seconds(60)), fb = b.finish(seconds(60));
  for (const Finished* f : {&fa, &fb}) {
    EXPECT_EQ(exit_code(*f), 0) << f->out;
    EXPECT_EQ(count(f->out, "finished: 2 ranks"), 1) << f->out;
    EXPECT_EQ(f->out.find("lost the rendezvous store"), std::string::npos) << f->out;
  }
  EXPECT_EQ(count(fb.out, waits), 1) << "one line while it waits:\n" << fb.out;
  EXPECT_TRUE(std::regex_search(fb.out, std::regex(R"(has not answered for 1\d(\.\d+)?s; still trying until \d\d:\d\d:\d\d \(--rdzv_timeout_s=600s\)\n)")))
      << fb.out;
  EXPECT_TRUE(no_orphan_running());
}

// SIGTERM to a launcher whose ranks run while the rendezvous store does not answer (its
// launcher stopped): its rank is stopped at once, and the launcher asks the silent store
// once at most per request, then leaves saying why (a tester's launcher stopped its rank
// after 10 s and left 30 s after the signal, without a word on why).
TEST(Elastic, ASignalDuringAStoreSilenceEndsTheLauncherWithinSeconds) {
  const std::string finish = temp_path("finish_store_silent_signal");
  TwoMachines m;
  ASSERT_NO_FATAL_FAILURE(start_two_machines(m, "storecutsig", 1, finish));
  Subprocess& a = *m.a;
  Subprocess& b = *m.b;
  a.send_signal(SIGSTOP);
  // Long enough for b's requests (its watch looks every 200 ms, one try waits 3 s) to have
  // gone unanswered.
  std::this_thread::sleep_for(seconds(4));
  const auto signalled = std::chrono::steady_clock::now();
  b.send_signal(SIGTERM);
  const bool rank_stopped = b.wait_for_stdout("launch: got SIGTERM: stopping 1 rank", 1, seconds(2));
  Finished fb = b.finish(seconds(60));
  const auto took = std::chrono::steady_clock::now() - signalled;
  a.send_signal(SIGCONT);
  std::ofstream(finish) << "done";
  Finished fa = a.finish(seconds(60));
  EXPECT_TRUE(rank_stopped) << "the rank was not stopped within 2 s of the signal:\n" << fb.out;
  EXPECT_EQ(exit_code(fb), 128 + SIGTERM) << fb.out;
  EXPECT_LT(took, seconds(10)) << fb.out;
  EXPECT_NE(fb.out.find("launch: got SIGTERM while the rendezvous store did not answer: leaving\n"), std::string::npos)
      << fb.out;
  EXPECT_EQ(fb.out.find("its launcher ended?"), std::string::npos) << fb.out;
  EXPECT_TRUE(no_orphan_running());
}

TEST(Elastic, BadFlagsAreRefusedBeforeAnythingStarts) {
  struct Case {
    std::vector<std::string> argv;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {launcher("127.0.0.1:1", "3:2", {}, {kRankProbe, "env"}), "--nnodes=3:2: MAX (2) is below MIN (3)"},
           {launcher("127.0.0.1:1", "0:2", {}, {kRankProbe, "env"}), "--nnodes=0:2: at least 1 machine"},
           {launcher("127.0.0.1:1", "1:x", {}, {kRankProbe, "env"}), "--nnodes=1:x: expected a number of machines"},
           {launcher("no-such-host.invalid:29400", "1:2", {}, {kRankProbe, "env"}),
            "--rdzv_endpoint=no-such-host.invalid:29400: cannot resolve 'no-such-host.invalid'"},
           {launcher("127.0.0.1:99999", "1:2", {}, {kRankProbe, "env"}), "--rdzv_endpoint=127.0.0.1:99999: the port"},
           {launcher("127.0.0.1:1", "1:2", {"--rdzv_id=a/b"}, {kRankProbe, "env"}), "--rdzv_id=a/b: expected"},
           {launcher("127.0.0.1:1", "1:2", {"--max_restarts=-1"}, {kRankProbe, "env"}), "--max_restarts=-1: must be >= 0"},
           {launcher("127.0.0.1:1", "1:2", {"--node_rank=1"}, {kRankProbe, "env"}), "--node_rank=1: with --rdzv_endpoint"},
           {{kLaunch, "--nnodes=1:3", "--", kRankProbe, "env"}, "--nnodes=1:3: a range of machines is an elastic job"},
       }) {
    Finished f = run(c.argv, seconds(30), {kToken});
    EXPECT_EQ(exit_code(f), 2) << c.message << "\n" << f.err;
    EXPECT_NE(f.err.find(c.message), std::string::npos) << f.err;
    EXPECT_EQ(f.out, "") << "nothing may start: " << c.message;
  }
}

// One job waits at the endpoint for a second machine; launchers of another job, or with
// another token, are refused at once by its store and leave it untouched. Then Ctrl-C ends
// the waiting launcher, which leaves nothing behind.
TEST(Elastic, AnotherJobOrAWrongTokenIsRefusedAtOnceAndCtrlCEndsARendezvous) {
  const int port = local::pick_free_port();
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  const std::string tmp = fresh_tmpdir("elastic_tmp");
  Subprocess waiting(launcher(endpoint, "2:2", {"--rdzv_id=job7"}, {kRankProbe, "env"}), {kToken, "TMPDIR=" + tmp},
                     /*merge_stderr=*/true);
  ASSERT_TRUE(distcomm::testing::accepts_connections(port, seconds(30)));

  auto start = std::chrono::steady_clock::now();
  Finished other_job = run(launcher(endpoint, "2:2", {"--rdzv_id=job8"}, {kRankProbe, "env"}), seconds(30), {kToken});
  EXPECT_EQ(exit_code(other_job), 1) << other_job.err;
  EXPECT_NE(other_job.err.find("--rdzv_endpoint=" + endpoint + ": the rendezvous store refused this launcher"),
            std::string::npos)
      << other_job.err;
  EXPECT_NE(other_job.err.find("belongs to another job"), std::string::npos) << other_job.err;
  Finished wrong_token = run(launcher(endpoint, "2:2", {"--rdzv_id=job7"}, {kRankProbe, "env"}), seconds(30),
                             {"DISTCOMM_STORE_TOKEN=not-the-token"});
  EXPECT_EQ(exit_code(wrong_token), 1) << wrong_token.err;
  EXPECT_NE(wrong_token.err.find("wrong store token"), std::string::npos) << wrong_token.err;
  Finished other_settings = run(launcher(endpoint, "1:2", {"--rdzv_id=job7"}, {kRankProbe, "env"}), seconds(30), {kToken});
  EXPECT_EQ(exit_code(other_settings), 2) << other_settings.err;
  EXPECT_NE(other_settings.err.find("--nnodes=1:2: the job's launchers use 2:2"), std::string::npos) << other_settings.err;
  EXPECT_EQ(other_job.out + wrong_token.out + other_settings.out, "") << "no rank may start";
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20)) << "refused at once, not after a timeout";

  waiting.send_signal(SIGINT);
  Finished f = waiting.finish(seconds(30));
  ASSERT_FALSE(f.timed_out) << f.out;
  EXPECT_EQ(exit_code(f), 128 + SIGINT) << f.out;
  EXPECT_NE(f.out.find("launch: got SIGINT during the rendezvous: leaving"), std::string::npos) << f.out;
  EXPECT_EQ(f.out.find("[rank"), std::string::npos) << "no rank started: " << f.out;
  EXPECT_TRUE(entries_of(tmp).empty()) << "the launcher left files in TMPDIR";
  EXPECT_TRUE(no_orphan_running());
}

// Ctrl-C to one machine's launcher while its ranks run: it stops them, ends the round and
// leaves; the other machine goes on alone (MIN is 1), counting a restart.
TEST(Elastic, CtrlCOnOneMachineLetsTheOthersGoOn) {
  const std::string finish = temp_path("finish_ctrl_c");
  const std::string tmp = fresh_tmpdir("elastic_ctrl_c_tmp");
  TwoMachines m;
  ASSERT_NO_FATAL_FAILURE(start_two_machines(m, "ctrlc", 1, finish, {kToken, "TMPDIR=" + tmp}));
  Subprocess& a = *m.a;
  Subprocess& b = *m.b;
  b.send_signal(SIGINT);
  Finished fb = b.finish(seconds(30));
  EXPECT_EQ(exit_code(fb), 128 + SIGINT) << fb.out;
  EXPECT_NE(fb.out.find("launch: got SIGINT: stopping 1 rank"), std::string::npos) << fb.out;
  ASSERT_TRUE(a.wait_for_stdout("launch: rendezvous 'ctrlc' round 2: 1 machine (min 1, max 2)\n", 1, seconds(60)));
  ASSERT_TRUE(a.wait_for_stdout(" of 1 (node 0, restart 1)", 1, seconds(60)));
  std::ofstream(finish) << "done";
  Finished fa = a.finish(seconds(60));
  EXPECT_EQ(exit_code(fa), 0) << fa.out;
  EXPECT_TRUE(std::regex_search(fa.out, std::regex(R"(round 1 ended: node \d \(127\.0\.0\.1\) left: interrupted \(SIGINT\); restart 1 of 1\n)")))
      << fa.out;
  EXPECT_TRUE(entries_of(tmp).empty()) << "the interrupted launcher left files in TMPDIR";
  EXPECT_TRUE(no_orphan_running());
}

// The same without restarts: the machine that was not interrupted gives up with exit 1 and
// says so, not with the other's 130 (a review: a script took it for a Ctrl-C there).
TEST(Elastic, CtrlCOnOneMachineWithoutRestartsEndsTheOthersWithOne) {
  const std::string finish = temp_path("finish_ctrl_c_no_restarts");
  TwoMachines m;
  ASSERT_NO_FATAL_FAILURE(start_two_machines(m, "ctrlc0", 0, finish));
  Subprocess& a = *m.a;
  Subprocess& b = *m.b;
  b.send_signal(SIGINT);
  Finished fb = b.finish(seconds(30));
  EXPECT_EQ(exit_code(fb), 128 + SIGINT) << fb.out;
  Finished fa = a.finish(seconds(60));
  EXPECT_EQ(exit_code(fa), 1) << fa.out;
  EXPECT_TRUE(std::regex_search(fa.out, std::regex(R"(round 1 ended: node \d \(127\.0\.0\.1\) left: interrupted \(SIGINT\); gave up \(--max_restarts=0\)\n)")))
      << fa.out;
  EXPECT_TRUE(no_orphan_running());
}

TEST(Elastic, AnEndpointThatDoesNotAnswerIsReportedWithinTheTimeout) {
  // TEST-NET-1 (RFC 5737): resolves, is no address of this host, and nobody answers there.
  const auto start = std::chrono::steady_clock::now();
  // 12 s: the launcher says after 10 s that it is still trying (helper-68: with the default
  // 600 s it sat silent for ten minutes).
  Finished f = run(launcher("192.0.2.1:29400", "1:2", {"--rdzv_timeout_s=12"}, {kRankProbe, "env"}), seconds(40),
                   {kToken});
  EXPECT_EQ(exit_code(f), 1) << f.err;
  EXPECT_TRUE(std::regex_search(f.err, std::regex(R"(--rdzv_endpoint=192\.0\.2\.1:29400: no rendezvous store there yet \(.+\) after 1\d(\.\d+)?s; trying until --rdzv_timeout_s=12)")))
      << f.err;
  EXPECT_NE(f.err.find("--rdzv_endpoint=192.0.2.1:29400: cannot reach the rendezvous store: "), std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find("(--rdzv_timeout_s), the last one: "), std::string::npos) << f.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20));
}

// A rank fails on one machine: both machines stop, and with no restart left both exit
// with that rank's code.
TEST(Elastic, ARankFailureEndsTheRoundOnEveryMachine) {
  const int port = local::pick_free_port();
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  auto args = launcher(endpoint, "2:2", {"--nproc_per_node=2", "--rdzv_id=failing", "--max_restarts=1"},
                       {kRankProbe, "fail", "3", "7"});
  Subprocess first(args, {kToken}, /*merge_stderr=*/true);
  ASSERT_TRUE(distcomm::testing::accepts_connections(port, seconds(30)));
  Subprocess second(args, {kToken}, /*merge_stderr=*/true);
  Finished f1 = first.finish(seconds(90)), f2 = second.finish(seconds(90));
  for (const Finished* f : {&f1, &f2}) {
    EXPECT_EQ(exit_code(*f), 7) << f->out;
    EXPECT_TRUE(std::regex_search(f->out, std::regex(R"(round 1 ended: rank 3 failed \(exit code 7\) on node 1 \(127\.0\.0\.1\); restart 1 of 1\n)")))
        << f->out;
    EXPECT_TRUE(std::regex_search(f->out, std::regex(R"(round 2 ended: rank 3 failed \(exit code 7\) on node 1 \(127\.0\.0\.1\); gave up after 1 restart \(--max_restarts=1\)\n)")))
        << f->out;
  }
  EXPECT_TRUE(no_orphan_running());
}

}  // namespace
}  // namespace testing
}  // namespace distcomm
