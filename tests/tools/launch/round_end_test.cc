// What an elastic launcher does after a round ended is decided on the end's cause, carried
// through the rendezvous store beside its words, never on the words themselves
// (launch/round_end.h): it searched the text for " left: interrupted (", so any rewording
// of that line silently changed what the other machines did.
#include <signal.h>

#include <gtest/gtest.h>

#include "api/store/hash_store.h"
#include "launch/outside_stop.h"
#include "launch/rendezvous.h"
#include "launch/round_end.h"

namespace distcomm {
namespace launch {
namespace {

RoundEnd interrupted(int sig, const std::string& why, bool from_terminal = false) {
  RoundEnd e{true, 1, why, RoundEndCause::kLauncherInterrupted, sig};
  e.from_terminal = from_terminal;
  return e;
}

// A Ctrl-C or Ctrl-\ at one machine's terminal (the kernel sends it, sender pid 0) reaches
// that machine's launcher alone: that machine was removed, and the others start the next
// round without waiting.
TEST(RoundEnd, AMachineInterruptedAtItsTerminalIsRemovedWithoutAWait) {
  for (int sig : {SIGINT, SIGQUIT}) {
    const AfterRoundEnd after =
        after_round_end(interrupted_end("node 1 (10.0.0.2) left: interrupted", sig, /*from_terminal=*/true));
    EXPECT_TRUE(after.removed_on_purpose) << sig;
    EXPECT_EQ(after.hold_for_own_stop.count(), 0) << sig;
  }
}

// A machine removed on purpose is a membership change, as one joining is: it counts no
// restart (the next round's count is the last one's plus one per restart end), so under
// --max_restarts=0 the others go on. A signal that may be the whole job's stays a restart.
TEST(RoundEnd, AMachineRemovedOnPurposeCountsNoRestart) {
  for (int sig : {SIGINT, SIGQUIT}) {
    const RoundEnd removed = interrupted_end("node 1 (10.0.0.2) left: interrupted", sig, /*from_terminal=*/true);
    EXPECT_FALSE(removed.restart) << sig;
    const std::optional<RoundEnd> read = decode_round_end(encode_round_end(removed));
    ASSERT_TRUE(read.has_value());
    EXPECT_FALSE(read->restart) << sig;
    EXPECT_TRUE(after_round_end(*read).removed_on_purpose) << sig;
  }
  for (int sig : {SIGTERM, SIGINT, SIGQUIT, SIGHUP}) {
    const RoundEnd sent = interrupted_end("node 1 left: interrupted", sig, /*from_terminal=*/false);
    EXPECT_TRUE(sent.restart) << sig;
    EXPECT_EQ(sent.exit_code, 1) << sig;
  }
  EXPECT_TRUE(interrupted_end("node 1 left", SIGHUP, /*from_terminal=*/true).restart);
  EXPECT_TRUE(interrupted_end("node 1 left", SIGTERM, /*from_terminal=*/true).restart);
}

// An exit code is 0 to 255 in plain digits; anything else is a malformed end, refused as a
// missing one is. "99999999999" was read as 1215752191 (it wrapped past an int).
TEST(RoundEnd, AnExitCodeOutOfRangeOrNotANumberIsMalformed) {
  for (const char* code : {"99999999999", "4294967297", "256", "-1", "+7", " 7", "7 ", "0x7", "1e2", "", "seven"}) {
    EXPECT_FALSE(decode_round_end(std::string("restart|") + code + "|rank_failed|rank 3 failed").has_value())
        << "'" << code << "'";
    EXPECT_FALSE(decode_round_end(std::string("restart|") + code + "|rank 3 failed").has_value()) << "'" << code << "'";
  }
  for (int code : {0, 1, 143, 255}) {
    const std::optional<RoundEnd> e =
        decode_round_end("restart|" + std::to_string(code) + "|rank_failed|rank 3 failed (exit code 7)");
    ASSERT_TRUE(e.has_value()) << code;
    EXPECT_EQ(e->exit_code, code);
    EXPECT_EQ(e->cause, RoundEndCause::kRankFailed);
  }
}

// The first field is one of the two words every launcher has written, "restart" or
// "membership"; anything else ("", a typo) is a malformed end, refused as a missing one is.
// It was read as a membership change, which counts no restart: a garbled failure's end let
// the others go on under --max_restarts=0.
TEST(RoundEnd, AFirstFieldOtherThanRestartOrMembershipIsMalformed) {
  for (const char* kind : {"", "restrat", "Restart", "restart ", " membership", "membershi", "join", "1"}) {
    const std::string k = kind;
    EXPECT_FALSE(decode_round_end(k + "|1|rank_failed|rank 3 failed").has_value()) << "'" << k << "'";
    EXPECT_FALSE(decode_round_end(k + "|1|rank 3 failed").has_value()) << "'" << k << "'";
  }
  const std::optional<RoundEnd> restart = decode_round_end("restart|1|rank_failed|rank 3 failed");
  ASSERT_TRUE(restart.has_value());
  EXPECT_TRUE(restart->restart);
  const std::optional<RoundEnd> membership = decode_round_end("membership|0|machines_wait|a machine waits to join");
  ASSERT_TRUE(membership.has_value());
  EXPECT_FALSE(membership->restart);
  EXPECT_EQ(membership->cause, RoundEndCause::kMachinesWait);
}

// SIGTERM is what a scheduler sends every machine of a job it stops, and a SIGINT, SIGQUIT
// or SIGHUP sent with kill (scancel --signal=INT, srun forwarding a Ctrl-C) or by closed ssh
// sessions may be the whole job's too: the others wait a moment for their own before they
// start ranks only to stop them (outside_stop.h). (The review of aba3a81 found a job
// stopped with SIGINT on every machine starting a new round at once.)
TEST(RoundEnd, ASignalThatMayBeTheWholeJobsHoldsTheOthersForTheirOwn) {
  for (int sig : {SIGTERM, SIGINT, SIGQUIT, SIGHUP}) {
    const AfterRoundEnd sent = after_round_end(interrupted_end("node 1 left: interrupted", sig, /*from_terminal=*/false));
    EXPECT_EQ(sent.hold_for_own_stop, kOutsideStopHold) << sig;
    EXPECT_FALSE(sent.removed_on_purpose) << sig;
    const AfterRoundEnd unknown = after_round_end(interrupted_end("node 1 left: interrupted", sig, /*from_terminal=*/false));
    EXPECT_EQ(unknown.hold_for_own_stop, kOutsideStopHold) << sig;
  }
  // A closed terminal's SIGHUP comes from the kernel too, but closed ssh sessions hang up
  // every machine at once: held.
  EXPECT_EQ(after_round_end(interrupted_end("node 1 left", SIGHUP, true)).hold_for_own_stop, kOutsideStopHold);
  EXPECT_EQ(after_round_end(interrupted_end("node 1 left", SIGTERM, true)).hold_for_own_stop, kOutsideStopHold);
}

// Every other cause: no hold, no removal -- whatever the words say.
TEST(RoundEnd, OtherCausesNeitherHoldNorRemove) {
  for (RoundEndCause cause : {RoundEndCause::kRankFailed, RoundEndCause::kLauncherEnded,
                              RoundEndCause::kLauncherWentAway, RoundEndCause::kEveryoneWentAway,
                              RoundEndCause::kMachinesWait}) {
    // The words of an interrupted launcher, with another cause: the words decide nothing.
    const AfterRoundEnd after =
        after_round_end(RoundEnd{true, 1, "node 1 (10.0.0.2) left: interrupted (SIGTERM)", cause, SIGTERM});
    EXPECT_EQ(after.hold_for_own_stop.count(), 0) << static_cast<int>(cause);
    EXPECT_FALSE(after.removed_on_purpose) << static_cast<int>(cause);
  }
}

// The cause decides with any words: reworded, translated, or none.
TEST(RoundEnd, TheDecisionDoesNotReadTheWords) {
  for (const std::string why : {"", "node 1 quit: SIGTERM", "le noeud 1 est parti (interrompu)"}) {
    EXPECT_EQ(after_round_end(interrupted(SIGTERM, why)).hold_for_own_stop, kOutsideStopHold) << why;
    EXPECT_TRUE(after_round_end(interrupted(SIGINT, why, /*from_terminal=*/true)).removed_on_purpose) << why;
  }
}

// Through the store, as the other launchers read it: the cause and signal come back, and
// the words exactly as written (a '|' in them too).
TEST(RoundEnd, TheCauseTravelsThroughTheRendezvousStore) {
  HashStore store;
  ElasticOptions options;
  options.rdzv_id = "round_end_test";
  Rendezvous rendezvous(store, options, /*max_restarts=*/3);
  const RoundEnd written = interrupted(SIGINT, "node 1 (10.0.0.2) left: interrupted (SIGINT) | really", true);
  const RoundEnd stands = rendezvous.end(1, written);
  const std::optional<RoundEnd> read = rendezvous.end_of(1);
  ASSERT_TRUE(read.has_value());
  for (const RoundEnd* e : {&stands, &*read}) {
    EXPECT_TRUE(e->restart);
    EXPECT_EQ(e->exit_code, 1);
    EXPECT_EQ(e->cause, RoundEndCause::kLauncherInterrupted);
    EXPECT_EQ(e->signal, SIGINT);
    EXPECT_TRUE(e->from_terminal);
    EXPECT_EQ(e->why, written.why);
  }
  // Sent with kill: read back as such.
  const std::optional<RoundEnd> sent =
      decode_round_end(encode_round_end(interrupted_end("node 2 left: interrupted (SIGINT)", SIGINT, false)));
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(sent->cause, RoundEndCause::kLauncherInterrupted);
  EXPECT_EQ(sent->signal, SIGINT);
  EXPECT_FALSE(sent->from_terminal);
  // First wins: a later end of the same round leaves the first's cause.
  const RoundEnd later = rendezvous.end(1, RoundEnd{true, 2, "rank 3 failed", RoundEndCause::kRankFailed});
  EXPECT_EQ(later.cause, RoundEndCause::kLauncherInterrupted);
  EXPECT_EQ(later.why, written.why);
}

TEST(RoundEnd, EveryCauseIsReadBackAsWritten) {
  for (RoundEndCause cause : {RoundEndCause::kUnknown, RoundEndCause::kRankFailed, RoundEndCause::kLauncherEnded,
                              RoundEndCause::kLauncherWentAway, RoundEndCause::kEveryoneWentAway,
                              RoundEndCause::kMachinesWait}) {
    const RoundEnd e{false, 0, "a|b", cause};
    const std::optional<RoundEnd> back = decode_round_end(encode_round_end(e));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->cause, cause);
    EXPECT_EQ(back->why, "a|b");
    EXPECT_FALSE(back->restart);
  }
}

// The launcher serving the rendezvous store got a stopping signal: the store ends with it,
// so the whole job stops -- not a machine removed, no hold, no restart -- with 128 + the
// signal on every machine. Through the store too, from the terminal or not.
TEST(RoundEnd, TheStoreHostsStopIsTheWholeJobs) {
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP}) {
    for (bool terminal : {true, false}) {
      const RoundEnd stop = job_stop_end("the job was stopped at node 0's terminal", sig, terminal);
      const std::optional<RoundEnd> back = decode_round_end(encode_round_end(stop));
      ASSERT_TRUE(back.has_value());
      for (const RoundEnd* e : {&stop, &*back}) {
        EXPECT_EQ(e->cause, RoundEndCause::kJobStopped) << sig;
        EXPECT_EQ(e->signal, sig);
        EXPECT_EQ(e->from_terminal, terminal);
        EXPECT_EQ(e->exit_code, 128 + sig);
        EXPECT_FALSE(e->restart);
        EXPECT_EQ(e->why, stop.why);
        const AfterRoundEnd after = after_round_end(*e);
        EXPECT_TRUE(after.job_stopped) << sig;
        EXPECT_FALSE(after.removed_on_purpose) << sig;
        EXPECT_EQ(after.hold_for_own_stop.count(), 0) << sig;
      }
    }
  }
  // No other cause stops the job.
  EXPECT_FALSE(after_round_end(interrupted_end("node 1 left", SIGINT, /*from_terminal=*/true)).job_stopped);
  EXPECT_FALSE(after_round_end(interrupted_end("node 1 left", SIGTERM, /*from_terminal=*/false)).job_stopped);
  EXPECT_FALSE(decode_round_end("membership|130|job_stopped:x|why")->cause == RoundEndCause::kJobStopped);
}

// The job's stop stands in the store (first wins) and ends the round that runs, whose
// members' watches read round ends; a launcher waiting for a round reads it in join().
TEST(RoundEnd, TheJobsStopEndsTheRunningRoundAndTheWaitForOne) {
  HashStore store;
  ElasticOptions options;
  options.rdzv_id = "round_end_test";
  options.min_nodes = 1;
  options.max_nodes = 1;
  Rendezvous rendezvous(store, options, /*max_restarts=*/3);
  Liveness liveness(std::chrono::seconds(10));
  const std::optional<Round> round = rendezvous.join({"a", "127.0.0.1", 1, 1, 1}, liveness, [] { return false; });
  ASSERT_TRUE(round.has_value());
  EXPECT_FALSE(rendezvous.job_stop().has_value());
  const RoundEnd stop = job_stop_end("the job was stopped at node 0's terminal", SIGINT, true);
  EXPECT_EQ(rendezvous.stop_job(stop).why, stop.why);
  const std::optional<RoundEnd> end = rendezvous.end_of(round->number);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->cause, RoundEndCause::kJobStopped);
  // First wins.
  EXPECT_EQ(rendezvous.stop_job(job_stop_end("later", SIGTERM, false)).why, stop.why);
  ASSERT_TRUE(rendezvous.job_stop().has_value());
  EXPECT_EQ(rendezvous.job_stop()->signal, SIGINT);
  EXPECT_FALSE(rendezvous.stop_seen("b"));
  rendezvous.mark_stop_seen("b");
  EXPECT_TRUE(rendezvous.stop_seen("b"));
  try {
    rendezvous.join({"b", "127.0.0.1", 1, 2, 2}, liveness, [] { return false; });
    ADD_FAILURE() << "join() formed a round after the job's stop";
  } catch (const JobStopped& e) {
    EXPECT_EQ(e.stop.why, stop.why);
    EXPECT_EQ(e.stop.exit_code, 130);
  }
}

// A value without a cause (as written before it was) reads as unknown, its words whole;
// one that is no end at all is refused.
TEST(RoundEnd, AnEndWithoutACauseReadsAsUnknown) {
  const std::optional<RoundEnd> old = decode_round_end("restart|1|node 1 (10.0.0.2) left: interrupted (SIGINT)");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->cause, RoundEndCause::kUnknown);
  EXPECT_EQ(old->why, "node 1 (10.0.0.2) left: interrupted (SIGINT)");
  EXPECT_FALSE(after_round_end(*old).removed_on_purpose);
  // An older launcher (no cause field) said every departure by a signal in these words,
  // and the others held for each: the one place the words still decide.
  for (const char* sig : {"SIGTERM", "SIGINT"}) {
    const std::optional<RoundEnd> older =
        decode_round_end(std::string("restart|1|node 2 (10.0.0.3) left: interrupted (") + sig + ")");
    ASSERT_TRUE(older.has_value());
    EXPECT_EQ(after_round_end(*older).hold_for_own_stop, kOutsideStopHold) << sig;
  }
  EXPECT_EQ(after_round_end(*decode_round_end("restart|1|rank 3 failed (exit code 1) on node 1")).hold_for_own_stop.count(),
            0);
  const std::optional<RoundEnd> piped = decode_round_end("restart|1|rank 0 failed (x|y) on node 0");
  ASSERT_TRUE(piped.has_value());
  EXPECT_EQ(piped->why, "rank 0 failed (x|y) on node 0");
  EXPECT_FALSE(decode_round_end("restart|one|why").has_value());
  EXPECT_FALSE(decode_round_end("restart").has_value());
  EXPECT_FALSE(decode_round_end("restart|1|interrupted:x|why")->cause == RoundEndCause::kLauncherInterrupted);
  EXPECT_FALSE(decode_round_end("restart|1|interrupted:+15|why")->cause == RoundEndCause::kLauncherInterrupted);
}

}  // namespace
}  // namespace launch
}  // namespace distcomm
