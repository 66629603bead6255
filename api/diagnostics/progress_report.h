// ProgressReport: where one rank of a group stands -- the ops it has issued and not
// finished, and the last collective it issued -- as its stall watch publishes it when an op
// waits too long, and what the comparison of the ranks' reports concludes.
//
// When ranks disagree on an op (a count, a dtype, a root, a skipped collective, a recv
// larger than the send), the backend keeps their messages from matching (gloo's tags and
// slots carry the op's fingerprint), so the op waits. These functions turn that wait into
// a named error: a Desync with the table of what each rank runs at that sequence number, a
// point-to-point size mismatch naming both counts, or, for a Timeout, which ranks are where
// ("ranks [1] are still at all_reduce #11").
//
// Pure functions over plain data: the store traffic is stall_watch.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {

// Built by the core's stall watch only (and read back from the text the board carries): no
// plugin builds one, so the fields after waiting_ms are not part of the plugins' ABI, as
// OpFingerprint's layout is (plugin.h).
struct PendingOp {
  OpFingerprint fingerprint;
  int64_t waiting_ms = 0;  // since it was issued
  // Point to point: whether `fingerprint.ordinal` can be compared with the peer's
  // (OpNumbering::next_ordinal's epoch, kept per Work by the core: work_marks.h). Outside
  // DISTCOMM_DEBUG=DETAIL a (direction, peer) counts only its 256 most recent tags; two
  // sides that used more tags in other orders may have restarted a tag's count at different
  // times, and then pair unrelated transfers by (tag, ordinal). 0 on both sides until the
  // pair has dropped a tag. A send and a recv whose epochs differ give no size-mismatch
  // verdict (p2p_verdict.h).
  uint64_t ordinal_epoch = 0;
  // A recv that refused its message and is draining it (refused_transfers.h): it fails on
  // its own and is no stall. Reported all the same, so that the peer's send still pairs with
  // it (not taken for one no recv claims, "unfit" for another recv from any rank), but never
  // the subject or the counterpart of a size-mismatch verdict.
  bool refusal_draining = false;
};

struct ProgressReport {
  int rank = -1;
  // The request it answers: the board's request count when it was published (a rank asks
  // by raising the count, and waits for reports that answer its request).
  int64_t request = 0;
  // The rank has closed the group (destroyed it, or its process is exiting): its last
  // word, which answers every later request.
  bool left = false;
  // Issued and not finished, oldest first (collectives and point-to-point ops).
  std::vector<PendingOp> pending;
  // The newest collective issued, and whether it has finished.
  std::optional<OpFingerprint> last_collective;
  bool last_collective_finished = false;

  // The oldest pending collective, if any.
  const PendingOp* oldest_collective() const;

  std::string encode() const;
  static std::optional<ProgressReport> decode(const std::string& text);
};

// What the reports say about one of this rank's pending ops.
struct Verdict {
  enum class Kind {
    kNone,         // nothing certain: the others may still come
    kDesync,       // ranks run different collectives at the same sequence number
    kSizeMismatch  // a send and its recv disagree on count or dtype
  };
  Kind kind = Kind::kNone;
  std::string message;
  // The op of this rank that cannot finish (its fingerprint), when kind != kNone.
  std::optional<OpFingerprint> op;
};

// Compares this rank's report (by_rank[mine.rank]) with the others' (nullopt: no report).
// Only ops waiting at least min_waiting_ms on both sides count: a report a moment old may
// show an op that has since matched.
//   - A collective: some rank has a pending collective at the same sequence number whose
//     agreement hash differs (or an all_to_all whose splits do not pair up) -> kDesync,
//     with the table of every rank's op there.
//   - A send or recv with a known peer: the peer's pending op of the same pair, tag and
//     ordinal disagrees on count or dtype, and none of the peer's pending ops could match
//     it -> kSizeMismatch, naming both counts.
//   - A recv from any rank: ranks send to this one with its tag (sends that no recv from
//     their own rank pairs with), and none of them fits -> kSizeMismatch, naming the first
//     such send; and for such a send, the same verdict on its sender's side.
Verdict compare_reports(const std::vector<std::optional<ProgressReport>>& by_rank, int mine,
                        int64_t min_waiting_ms);

// A Desync's message: the ranks disagree on collective #seq; `table` shows each rank's op
// there (rank_table), `pairs` the all_to_all splits that do not pair ("" for none).
// found_by_detail: DISTCOMM_DEBUG=DETAIL's checks found it (the message then does not
// suggest turning them on).
std::string desync_message(uint64_t seq, const std::string& table, const std::string& pairs,
                           bool found_by_detail);
// The same, found by a backend (plugins built before the flag call this one).
std::string desync_message(uint64_t seq, const std::string& table, const std::string& pairs);

// For a Timeout of `op` on rank `mine`: where the other ranks are, one clause per group of
// ranks ("ranks [1] are still at all_reduce #10; rank 2 has not issued #11 yet (its last
// collective: broadcast #10, finished); rank 3 did not report (busy outside distcomm,
// stuck in the program, gone, or cut off from the store)"), or "" when there is nothing to say.
// silent_notes: per rank, what is known of a rank that did not report (process_state_note:
// "its process 4242 on this host is stopped (...)"), said after "did not report: " in place
// of the guesses; "" (or no entry) keeps the guesses.
std::string explain_wait(const OpFingerprint& op, const std::vector<std::optional<ProgressReport>>& by_rank,
                         int mine, const std::vector<std::string>& silent_notes);
// The same with no notes: the signature plugins built before the notes were added call.
std::string explain_wait(const OpFingerprint& op, const std::vector<std::optional<ProgressReport>>& by_rank,
                         int mine);

// What the kernel says of the process `pid` of a rank that did not report, where that process
// runs on this host (the same process_domain(), auto_backend.h): `stat` is its /proc/<pid>/stat,
// nullopt where no such process exists. "its process 4242 on this host is stopped (SIGSTOP or
// Ctrl-Z; SIGCONT resumes it)" (state T), "... is stopped by a debugger (traced)" (t), "...
// has ended (pid 4242 is gone)" (no such pid; a zombie, Z, says it is not reaped yet); "" for
// any other state (running, sleeping: the guesses stand) or a text that does not parse. The
// state follows the LAST ')': the command name before it may hold spaces and ')'.
std::string process_state_note(int pid, const std::optional<std::string>& stat);

// For collective `op`, in which rank `mine` waits: the first other rank whose report says it
// left the group (closed it on its side) without issuing op -- it never will -- and words
// that say so ("rank 1 left the group (closed it on its side) after barrier #0, without
// issuing #1"); nullopt when every rank that left had issued it, or none left. A report
// that shows no collective at all is of a rank that issued none on this backend, and is
// judged so (the watch keeps the last collective apart from its ring of recent ops, so p2p
// ops after it cannot hide it).
struct Departure {
  int rank = -1;
  std::string message;
};
std::optional<Departure> departed_before(const OpFingerprint& op, const std::vector<std::optional<ProgressReport>>& by_rank,
                                         int mine);

}  // namespace distcomm
