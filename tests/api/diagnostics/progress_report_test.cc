// ProgressReport: the text form, and what comparing the ranks' reports concludes.
#include <gtest/gtest.h>

#include "api/diagnostics/progress_report.h"

namespace distcomm {
namespace {

OpFingerprint collective(OpType op, uint64_t seq, int64_t count, DType dtype = DType::kFloat32) {
  OpFingerprint f;
  f.op = op;
  f.seq = seq;
  f.set_tensor(Tensor::zeros({count}, dtype));
  if (op == OpType::kAllReduce) f.has_reduction = true;
  if (op == OpType::kBroadcast) f.root = 0;
  return f;
}

OpFingerprint transfer(OpType op, int peer, int64_t count, int64_t ordinal = 0, int tag = 0) {
  OpFingerprint f;
  f.op = op;
  f.p2p = true;
  f.set_tensor(Tensor::zeros({count}));
  f.root = peer;
  f.tag = tag;
  f.ordinal = ordinal;
  return f;
}

ProgressReport report(int rank, std::vector<OpFingerprint> pending, int64_t waiting_ms = 5000) {
  ProgressReport r;
  r.rank = rank;
  for (auto& f : pending) {
    r.pending.push_back({f, waiting_ms});
    if (!f.p2p) r.last_collective = f;
  }
  return r;
}

TEST(ProgressReport, EncodesAndDecodes) {
  ProgressReport r = report(2, {collective(OpType::kAllReduce, 4, 10), transfer(OpType::kSend, 1, 3)});
  r.request = 17;
  r.last_collective_finished = false;
  const auto back = ProgressReport::decode(r.encode());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->encode(), r.encode());
  EXPECT_EQ(back->request, 17);
  ASSERT_EQ(back->pending.size(), 2u);
  EXPECT_EQ(back->pending[1].fingerprint.describe(), "send p2p#0 float32[3] to 1 tag 0 (transfer 0)");
  EXPECT_EQ(back->pending[0].waiting_ms, 5000);
  EXPECT_FALSE(ProgressReport::decode("progress1 0 0 0 0 0 2\n").has_value()) << "two pending ops announced, none given";
  EXPECT_FALSE(ProgressReport::decode("junk").has_value());
}

TEST(ProgressReport, CollectivesThatDifferAtOneSequenceNumberAreDesync) {
  std::vector<std::optional<ProgressReport>> by_rank = {report(0, {collective(OpType::kAllReduce, 1, 10)}),
                                                        report(1, {collective(OpType::kAllReduce, 1, 20)}),
                                                        std::nullopt};
  const Verdict v = compare_reports(by_rank, 0, 3000);
  ASSERT_EQ(v.kind, Verdict::Kind::kDesync);
  EXPECT_NE(v.message.find("disagree on collective #1"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("  rank 0: all_reduce #1 float32[10] sum\n"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("  rank 1: all_reduce #1 float32[20] sum\n"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("  rank 2: (did not report"), std::string::npos) << v.message;
  // The table's last line ends the message: no newline after it (an empty line when printed).
  EXPECT_NE(v.message.back(), '\n') << v.message;
  ASSERT_TRUE(v.op.has_value());
  EXPECT_EQ(v.op->count, 10);
  // Too recent on one side: no verdict yet.
  by_rank[1]->pending[0].waiting_ms = 100;
  EXPECT_EQ(compare_reports(by_rank, 0, 3000).kind, Verdict::Kind::kNone);
}

TEST(ProgressReport, RanksThatAgreeOrLagAreNotAnError) {
  const std::vector<std::optional<ProgressReport>> by_rank = {report(0, {collective(OpType::kAllReduce, 3, 10)}),
                                                              report(1, {collective(OpType::kAllReduce, 3, 10)}),
                                                              report(2, {collective(OpType::kBroadcast, 2, 10)})};
  EXPECT_EQ(compare_reports(by_rank, 0, 3000).kind, Verdict::Kind::kNone);
}

TEST(ProgressReport, AllToAllSplitsThatDoNotPairAreDesync) {
  std::vector<std::optional<ProgressReport>> by_rank;
  for (int r = 0; r < 2; ++r) {
    OpFingerprint f = collective(OpType::kAllToAll, 1, 4);
    f.send_counts = r == 0 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{1, 3};
    f.recv_counts = {2, 2};
    by_rank.push_back(report(r, {f}));
  }
  const Verdict v = compare_reports(by_rank, 0, 0);
  ASSERT_EQ(v.kind, Verdict::Kind::kDesync);
  EXPECT_NE(v.message.find("rank 1 sends 1 elements to rank 0, which expects 2"), std::string::npos) << v.message;
  EXPECT_NE(v.message.back(), '\n') << v.message;
}

// The message of the size mismatch the reports show to rank `at` ("" and a failure if none).
std::string size_mismatch_at(const std::vector<std::optional<ProgressReport>>& by_rank, int at) {
  const Verdict v = compare_reports(by_rank, at, 3000);
  EXPECT_EQ(v.kind, Verdict::Kind::kSizeMismatch) << "at rank " << at;
  return v.kind == Verdict::Kind::kSizeMismatch ? v.message : "";
}

TEST(ProgressReport, SendAndRecvOfDifferentSizesNameBothCounts) {
  const std::vector<std::optional<ProgressReport>> by_rank = {report(0, {transfer(OpType::kSend, 1, 4)}),
                                                              report(1, {transfer(OpType::kRecv, 0, 2)})};
  EXPECT_EQ(size_mismatch_at(by_rank, 0),
            "send to rank 1 (tag 0, transfer 0): rank 1 receives into 2 float32 (8 bytes) but this rank sends 4 "
            "float32 (16 bytes); a send and its recv must have the same count and dtype");
  const std::string at_receiver = size_mismatch_at(by_rank, 1);
  EXPECT_NE(at_receiver.find("this rank's tensor holds 2 float32 (8 bytes) but rank 0 sends 4 float32 (16 bytes)"),
            std::string::npos)
      << at_receiver;
}

TEST(ProgressReport, ATransferThatMayStillMatchIsLeftToWait) {
  // The peer has a recv of the right size pending too (another ordinal): gloo may match it.
  std::vector<std::optional<ProgressReport>> by_rank = {
      report(0, {transfer(OpType::kSend, 1, 4)}),
      report(1, {transfer(OpType::kRecv, 0, 2), transfer(OpType::kRecv, 0, 4, /*ordinal=*/1)})};
  EXPECT_EQ(compare_reports(by_rank, 0, 3000).kind, Verdict::Kind::kNone);
  // A recv from any rank that fits may take it as well.
  by_rank[1] = report(1, {transfer(OpType::kRecvAnySource, -1, 4, -1)});
  EXPECT_EQ(compare_reports(by_rank, 0, 3000).kind, Verdict::Kind::kNone);
  // Another tag is another conversation.
  by_rank[1] = report(1, {transfer(OpType::kRecv, 0, 2, 0, /*tag=*/5)});
  EXPECT_EQ(compare_reports(by_rank, 0, 3000).kind, Verdict::Kind::kNone);
}

// A recv from any rank takes whichever send to it arrives first (as MPI and torch's gloo
// match): when no pending send with its tag fits it, the first that arrives would not fit.
TEST(ProgressReport, ARecvFromAnyRankThatNoSendFitsNamesBothSides) {
  std::vector<std::optional<ProgressReport>> by_rank = {
      report(0, {transfer(OpType::kRecvAnySource, -1, 2, -1)}),
      report(1, {}),
      report(2, {transfer(OpType::kSend, 0, 4)})};
  EXPECT_EQ(size_mismatch_at(by_rank, 0),
            "recv from any rank (tag 0): this rank's tensor holds 2 float32 (8 bytes) but rank 2 sends 4 float32 "
            "(16 bytes); a send and its recv must have the same count and dtype");
  EXPECT_EQ(size_mismatch_at(by_rank, 2),
            "send to rank 0 (tag 0, transfer 0): rank 0 receives from any rank into 2 float32 (8 bytes) but this "
            "rank sends 4 float32 (16 bytes); a send and its recv must have the same count and dtype");
  EXPECT_EQ(compare_reports(by_rank, 1, 3000).kind, Verdict::Kind::kNone) << "a bystander";

  // Another rank's send fits: that one may be the one it takes.
  by_rank[1] = report(1, {transfer(OpType::kSend, 0, 2)});
  EXPECT_EQ(compare_reports(by_rank, 0, 3000).kind, Verdict::Kind::kNone);
  EXPECT_EQ(compare_reports(by_rank, 2, 3000).kind, Verdict::Kind::kNone);
  // The send pairs with a recv from its own rank (same ordinal), which fits: not for this one.
  by_rank[1] = report(1, {});
  by_rank[0] = report(0, {transfer(OpType::kRecvAnySource, -1, 2, -1), transfer(OpType::kRecv, 2, 4)});
  EXPECT_EQ(compare_reports(by_rank, 0, 3000).kind, Verdict::Kind::kNone);
  // A send that waited less than the bound is not certain yet.
  by_rank[0] = report(0, {transfer(OpType::kRecvAnySource, -1, 2, -1)});
  by_rank[2] = report(2, {transfer(OpType::kSend, 0, 4)}, /*waiting_ms=*/100);
  EXPECT_EQ(compare_reports(by_rank, 0, 3000).kind, Verdict::Kind::kNone);
}

TEST(ProgressReport, ExplainsWhereTheOthersAre) {
  const OpFingerprint op = collective(OpType::kAllReduce, 11, 10);
  ProgressReport behind = report(1, {collective(OpType::kBroadcast, 9, 10)});
  ProgressReport idle;
  idle.rank = 2;
  idle.last_collective = collective(OpType::kAllReduce, 10, 10);
  idle.last_collective_finished = true;
  ProgressReport same = report(4, {op});
  const std::vector<std::optional<ProgressReport>> by_rank = {report(0, {op}), behind, idle, std::nullopt, same,
                                                              behind};
  EXPECT_EQ(explain_wait(op, by_rank, 0),
            "ranks [1, 5] are still at broadcast #9 float32[10] root 0; rank 2 has not issued #11 yet (its last "
            "collective: all_reduce #10 float32[10] sum, finished); rank 3 did not report (busy outside distcomm, "
            "stuck in the program, gone, or cut off from the store); rank 4 waits in it too");
  const OpFingerprint recv = transfer(OpType::kRecv, 1, 4);
  EXPECT_EQ(explain_wait(recv, by_rank, 0), "rank 1 has no transfer with this rank pending (it waits in broadcast #9 "
                                            "float32[10] root 0)");
}

// A rank that did not report whose process runs on this host: what /proc/<pid>/stat says of
// it replaces the guesses; a running process keeps them.
TEST(ProgressReport, NamesWhatTheProcessOfASilentRankIsDoing) {
  // The command name may hold spaces and ')': the state follows the last ')'.
  EXPECT_EQ(process_state_note(4242, std::string("4242 (a) b (T) S 1 4242 4242 0 -1")), "")
      << "a 'T' in the command name is not the state";
  EXPECT_EQ(process_state_note(4242, std::string("4242 (my) prog) T 1 4242 4242 0 -1")),
            "its process 4242 on this host is stopped (SIGSTOP or Ctrl-Z; SIGCONT resumes it)");
  EXPECT_EQ(process_state_note(4242, std::string("4242 (gdb target) t 1 4242")),
            "its process 4242 on this host is stopped by a debugger (traced)");
  EXPECT_EQ(process_state_note(4242, std::nullopt), "its process 4242 on this host has ended (pid 4242 is gone)");
  EXPECT_EQ(process_state_note(4242, std::string("4242 (x) Z 1 4242")),
            "its process 4242 on this host has ended (pid 4242 is a zombie its parent has not reaped)");
  EXPECT_EQ(process_state_note(4242, std::string("4242 (x) R 1 4242")), "");
  EXPECT_EQ(process_state_note(4242, std::string("4242 (x) S 1 4242")), "");
  EXPECT_EQ(process_state_note(4242, std::string("4242 (truncated")), "");
  EXPECT_EQ(process_state_note(4242, std::string("4242 (x)")), "");

  const OpFingerprint op = collective(OpType::kAllReduce, 11, 10);
  const std::vector<std::optional<ProgressReport>> by_rank = {report(0, {op}), std::nullopt, std::nullopt,
                                                              std::nullopt};
  const std::vector<std::string> notes = {"", process_state_note(4242, std::string("4242 (w) T 1")), "",
                                          process_state_note(4343, std::nullopt)};
  EXPECT_EQ(explain_wait(op, by_rank, 0, notes),
            "rank 1 did not report: its process 4242 on this host is stopped (SIGSTOP or Ctrl-Z; SIGCONT resumes "
            "it); rank 2 did not report (busy outside distcomm, stuck in the program, gone, or cut off from the "
            "store); rank 3 did not report: its process 4343 on this host has ended (pid 4343 is gone)");
  // Without notes (or a shorter list), the guesses.
  EXPECT_EQ(explain_wait(op, by_rank, 0, {"", ""}),
            "ranks [1, 2, 3] did not report (busy outside distcomm, stuck in the program, gone, or cut off from the "
            "store)");
  const OpFingerprint recv = transfer(OpType::kRecv, 3, 4);
  EXPECT_EQ(explain_wait(recv, by_rank, 0, notes),
            "rank 3 did not report: its process 4343 on this host has ended (pid 4343 is gone)");
}

}  // namespace
}  // namespace distcomm
