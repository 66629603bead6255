#include "api/diagnostics/progress_report.h"

#include <map>
#include <sstream>

namespace distcomm {
namespace {

// progress2: each pending op's line carries its ordinal epoch and draining mark before its
// fingerprint (all ranks of a group run one core, so no older reader meets it).
const char kFormat[] = "progress2";

bool is_collective(const OpFingerprint& f) { return !f.p2p; }

bool is_send(const OpFingerprint& f) { return f.op == OpType::kSend; }

const PendingOp* pending_at(const ProgressReport& r, uint64_t seq, int64_t min_waiting_ms) {
  for (const PendingOp& p : r.pending) {
    if (is_collective(p.fingerprint) && p.fingerprint.seq == seq && p.waiting_ms >= min_waiting_ms) return &p;
  }
  return nullptr;
}

std::string elements_text(const OpFingerprint& f) { return elements_text(f.count, f.dtype); }

// "rank 2 is" / "ranks [1, 2] are" / "95 ranks [0-47, 49-95] are" (ranks_text)
std::string subject(const std::vector<int>& ranks, const char* singular, const char* plural) {
  return ranks_text(ranks) + " " + (ranks.size() == 1 ? singular : plural);
}

// Clauses grouped by their text, in the order their first rank appears.
class Clauses {
 public:
  void add(int rank, const std::string& singular, const std::string& plural) {
    const std::string key = singular + "|" + plural;
    if (!ranks_.count(key)) order_.push_back({singular, plural});
    ranks_[key].push_back(rank);
  }
  std::string text() const {
    std::string s;
    for (const auto& [singular, plural] : order_) {
      s += (s.empty() ? "" : "; ") + subject(ranks_.at(singular + "|" + plural), singular.c_str(), plural.c_str());
    }
    return s;
  }

 private:
  std::vector<std::pair<std::string, std::string>> order_;
  std::map<std::string, std::vector<int>> ranks_;
};

// Whether `send` (of rank `sender`) pairs with one of the receiver's recvs from that rank:
// the same tag and ordinal.
bool paired_with_recv_from(const ProgressReport& receiver, int sender, const OpFingerprint& send) {
  for (const PendingOp& q : receiver.pending) {
    const OpFingerprint& g = q.fingerprint;
    if (g.p2p && !is_send(g) && g.root == sender && g.tag == send.tag && g.ordinal == send.ordinal) return true;
  }
  return false;
}

// Whether `receiver` has a recv draining a message it refused (PendingOp::refusal_draining)
// from any rank with the tag of `send`, which may be the message it drains (a draining recv
// from the sender itself pairs with its send by ordinal: paired_with_recv_from). Such a send
// is claimed, if by a recv that fails: offered to another recv from any rank, it looked
// unclaimed and "unfit" for it, and failed the group while the refusal drained.
bool drained_by(const ProgressReport& receiver, const OpFingerprint& send) {
  for (const PendingOp& q : receiver.pending) {
    const OpFingerprint& g = q.fingerprint;
    if (q.refusal_draining && g.p2p && !is_send(g) && g.root < 0 && g.tag == send.tag) return true;
  }
  return false;
}

// The pending sends that `receiver`'s pending recv from any rank (`any`) would take -- sent
// to it with the same tag, waiting long enough, not paired with a recv from their own rank --
// when none of them fits it (then whichever arrives first is a mismatch, as MPI would find
// it); empty when one fits (that one may be what it takes) or there is none.
std::vector<std::pair<int, const OpFingerprint*>> unfit_senders(const std::vector<std::optional<ProgressReport>>& by_rank,
                                                               int receiver, const OpFingerprint& any,
                                                               int64_t min_waiting_ms) {
  std::vector<std::pair<int, const OpFingerprint*>> unfit;
  if (receiver < 0 || receiver >= static_cast<int>(by_rank.size()) || !by_rank[receiver]) return unfit;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (static_cast<int>(r) == receiver || !by_rank[r]) continue;
    for (const PendingOp& q : by_rank[r]->pending) {
      const OpFingerprint& g = q.fingerprint;
      if (!g.p2p || !is_send(g) || g.root != receiver || g.tag != any.tag || q.waiting_ms < min_waiting_ms) continue;
      if (paired_with_recv_from(*by_rank[receiver], static_cast<int>(r), g)) continue;
      if (drained_by(*by_rank[receiver], g)) continue;
      if (g.p2p_hash() == any.p2p_hash()) return {};
      unfit.push_back({static_cast<int>(r), &g});
    }
  }
  return unfit;
}

// A rank that did not report, as a clause: what its process is doing where that is known
// (note), else the guesses.
std::string did_not_report(const std::string& note) {
  if (!note.empty()) return "did not report: " + note;
  return "did not report (busy outside distcomm, stuck in the program, gone, or cut off from the store)";
}

// The note for rank r (explain_wait's silent_notes), "" where none.
const std::string& note_of(const std::vector<std::string>& notes, size_t r) {
  static const std::string none;
  return r < notes.size() ? notes[r] : none;
}

const char kSameCountAndDtype[] = "; a send and its recv must have the same count and dtype";

// Where rank r stands relative to collective #seq, as a clause (both grammatical numbers).
// note: what is known of a rank that did not report (process_state_note), "" for nothing.
std::pair<std::string, std::string> position(const std::optional<ProgressReport>& r, const OpFingerprint& op,
                                             const std::string& note = "") {
  if (!r) {
    const std::string silent = did_not_report(note);
    return {silent, silent};
  }
  if (r->left) {
    const std::string last =
        r->last_collective ? " after " + r->last_collective->describe() : std::string(" before any collective");
    return {"has left the group" + last, "have left the group" + last};
  }
  if (const PendingOp* same = pending_at(*r, op.seq, 0)) {
    if (same->fingerprint.agreement_hash() == op.agreement_hash()) return {"waits in it too", "wait in it too"};
    return {"runs " + same->fingerprint.describe() + " there", "run " + same->fingerprint.describe() + " there"};
  }
  if (const PendingOp* oldest = r->oldest_collective()) {
    if (oldest->fingerprint.seq < op.seq) {
      const std::string at = "still at " + oldest->fingerprint.describe();
      return {"is " + at, "are " + at};
    }
  }
  const std::string seq = "#" + std::to_string(op.seq);
  if (!r->last_collective) return {"has not issued any collective yet", "have not issued any collective yet"};
  if (r->last_collective->seq < op.seq) {
    const std::string last = " yet (its last collective: " + r->last_collective->describe() +
                             (r->last_collective_finished ? ", finished)" : ", running)");
    return {"has not issued " + seq + last, "have not issued " + seq + last};
  }
  return {"has finished " + seq, "have finished " + seq};
}

// The ranks that did not report whose process on this host is known to be stopped, traced or
// ended (a note), as "; rank 5 did not report: its process ..." clauses; "" for none. A
// transfer's timeout names its own peer, which may be waiting itself, innocent: a stopped
// rank elsewhere in the group is then the likelier cause, and only a note (what the kernel
// says) is worth naming there; a rank merely silent could be any rank busy for a moment.
std::string stopped_ranks(const std::vector<std::optional<ProgressReport>>& by_rank,
                          const std::vector<std::string>& notes) {
  std::string s;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (!by_rank[r] && !note_of(notes, r).empty()) s += "; rank " + std::to_string(r) + " " + did_not_report(note_of(notes, r));
  }
  return s;
}

// A rank's first pending transfer with a known peer not in `seen`, -1 for none: what it
// waits on (in a ring every rank waits on the one before it).
int waits_on(const ProgressReport& r, const std::vector<bool>& seen) {
  for (const PendingOp& q : r.pending) {
    const OpFingerprint& g = q.fingerprint;
    if (g.p2p && g.root >= 0 && g.root < static_cast<int>(seen.size()) && !seen[g.root]) return g.root;
  }
  return -1;
}

// Where the waits starting at rank `from` (which waits, but not on this rank) lead, when
// they end at a rank that did not report: "; it waits on rank 8, which waits on rank 7, ...
// rank 5, which did not report: <note>" ("" when they end elsewhere: a rank waiting on
// nothing, a collective, a loop). Without it a ring whose one rank stopped blamed the
// innocent rank before the first to time out, and every other rank adopted that.
std::string wait_chain(int from, const std::vector<std::optional<ProgressReport>>& by_rank, int mine,
                       const std::vector<std::string>& notes) {
  std::vector<bool> seen(by_rank.size(), false);
  if (mine >= 0 && mine < static_cast<int>(seen.size())) seen[mine] = true;
  seen[from] = true;
  std::vector<int> path;
  for (int at = from; by_rank[at];) {
    const int next = waits_on(*by_rank[at], seen);
    if (next < 0) return "";
    seen[next] = true;
    path.push_back(next);
    at = next;
  }
  // Named in full up to a few hops; a long ring's middle goes as a count (the first two
  // and the last two named).
  constexpr size_t kNamedHops = 5;
  std::string s = "; it waits on rank " + std::to_string(path.front());
  for (size_t i = 1; i < path.size(); ++i) {
    if (path.size() > kNamedHops && i == 2) {
      s += ", which waits on " + std::to_string(path.size() - 4) + " more ranks in turn";
      i = path.size() - 2;
    }
    s += ", which waits on rank " + std::to_string(path[i]);
  }
  return s + ", which " + did_not_report(note_of(notes, static_cast<size_t>(path.back())));
}

}  // namespace

const PendingOp* ProgressReport::oldest_collective() const {
  for (const PendingOp& p : pending) {
    if (is_collective(p.fingerprint)) return &p;
  }
  return nullptr;
}

std::string ProgressReport::encode() const {
  std::ostringstream out;
  out << kFormat << " " << rank << " " << request << " " << left << " " << last_collective.has_value() << " " << last_collective_finished << " "
      << pending.size() << "\n";
  if (last_collective) out << last_collective->encode() << "\n";
  for (const PendingOp& p : pending) {
    out << p.waiting_ms << " " << p.ordinal_epoch << " " << p.refusal_draining << " " << p.fingerprint.encode() << "\n";
  }
  return out.str();
}

std::optional<ProgressReport> ProgressReport::decode(const std::string& text) {
  std::istringstream in(text);
  std::string line, format;
  ProgressReport r;
  bool has_last = false;
  size_t n = 0;
  if (!std::getline(in, line)) return std::nullopt;
  std::istringstream head(line);
  if (!(head >> format >> r.rank >> r.request >> r.left >> has_last >> r.last_collective_finished >> n) || format != kFormat ||
      n > 4096) {
    return std::nullopt;
  }
  if (has_last) {
    if (!std::getline(in, line)) return std::nullopt;
    r.last_collective = OpFingerprint::decode(line);
    if (!r.last_collective) return std::nullopt;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!std::getline(in, line)) return std::nullopt;
    std::istringstream fields(line);
    PendingOp p;
    if (!(fields >> p.waiting_ms >> p.ordinal_epoch >> p.refusal_draining)) return std::nullopt;
    std::string rest;
    std::getline(fields >> std::ws, rest);
    auto f = OpFingerprint::decode(rest);
    if (!f) return std::nullopt;
    p.fingerprint = *f;
    r.pending.push_back(std::move(p));
  }
  return r;
}

Verdict compare_reports(const std::vector<std::optional<ProgressReport>>& by_rank, int mine,
                        int64_t min_waiting_ms) {
  Verdict v;
  if (mine < 0 || mine >= static_cast<int>(by_rank.size()) || !by_rank[mine]) return v;
  const ProgressReport& me = *by_rank[mine];

  // A collective: what every rank runs at its sequence number.
  const PendingOp* stalled = me.oldest_collective();
  if (stalled && stalled->waiting_ms >= min_waiting_ms) {
    const OpFingerprint& op = stalled->fingerprint;
    bool differs = false;
    std::vector<OpFingerprint> all_to_alls;
    std::vector<std::string> texts;
    for (size_t r = 0; r < by_rank.size(); ++r) {
      // Any op there goes in the table; only ops that have waited long enough decide.
      const PendingOp* there = by_rank[r] ? pending_at(*by_rank[r], op.seq, 0) : nullptr;
      if (there) {
        if (there->waiting_ms >= min_waiting_ms) differs |= there->fingerprint.agreement_hash() != op.agreement_hash();
        all_to_alls.push_back(there->waiting_ms >= min_waiting_ms ? there->fingerprint : OpFingerprint());
        texts.push_back(there->fingerprint.describe());
      } else {
        all_to_alls.push_back(OpFingerprint());  // no splits: pairs with it are not compared
        texts.push_back("(" + position(by_rank[r], op).first + ")");
      }
    }
    std::string pairs;
    if (!differs && op.op == OpType::kAllToAll) pairs = all_to_all_mismatches(all_to_alls);
    if (differs || !pairs.empty()) {
      v.kind = Verdict::Kind::kDesync;
      v.op = op;
      v.message = desync_message(op.seq, rank_table(texts), pairs);
      return v;
    }
  }

  // Point to point: a pending send or recv and its counterpart on the peer.
  for (const PendingOp& p : me.pending) {
    const OpFingerprint& f = p.fingerprint;
    if (!f.p2p || p.waiting_ms < min_waiting_ms || p.refusal_draining) continue;  // a draining recv: no stall
    if (f.root < 0) {
      // A recv from any rank: the sends to this rank it would take, when none fits.
      if (is_send(f)) continue;
      const auto unfit = unfit_senders(by_rank, mine, f, min_waiting_ms);
      if (unfit.empty()) continue;
      const std::string sender = "rank " + std::to_string(unfit.front().first);
      v.kind = Verdict::Kind::kSizeMismatch;
      v.op = f;
      v.message = "recv from any rank (tag " + std::to_string(f.tag) + "): this rank's tensor holds " +
                  elements_text(f) + " but " + sender + " sends " + elements_text(*unfit.front().second) +
                  kSameCountAndDtype;
      return v;
    }
    if (f.ordinal < 0 || f.root >= static_cast<int>(by_rank.size()) || !by_rank[f.root]) continue;
    const OpFingerprint* same_ordinal = nullptr;
    const OpFingerprint* takes_it = nullptr;  // the peer's recv from any rank that would take this send
    bool could_match = false;
    for (const PendingOp& q : by_rank[f.root]->pending) {
      const OpFingerprint& g = q.fingerprint;
      if (!g.p2p || g.tag != f.tag || is_send(g) == is_send(f) || q.waiting_ms < min_waiting_ms) continue;
      if (q.refusal_draining) continue;  // it failed on its own: no verdict against it
      if (g.root != mine && g.root >= 0) continue;  // another pair
      if (g.p2p_hash() == f.p2p_hash()) {
        could_match = true;  // one that fits: the transfer may still happen
        break;
      }
      if (g.root < 0) {
        for (const auto& [rank, send] : unfit_senders(by_rank, f.root, g, min_waiting_ms)) {
          if (rank == mine && send->ordinal == f.ordinal) takes_it = &g;
        }
        continue;
      }
      if (g.ordinal == f.ordinal) same_ordinal = &g;
    }
    if (could_match || !(same_ordinal || takes_it)) continue;
    const std::string peer = "rank " + std::to_string(f.root);
    const std::string which = " (tag " + std::to_string(f.tag) + ", transfer " + std::to_string(f.ordinal) + "): ";
    v.kind = Verdict::Kind::kSizeMismatch;
    v.op = f;
    if (!same_ordinal) {
      v.message = "send to " + peer + which + peer + " receives from any rank into " + elements_text(*takes_it) +
                  " but this rank sends " + elements_text(f);
    } else if (is_send(f)) {
      v.message = "send to " + peer + which + peer + " receives into " + elements_text(*same_ordinal) +
                  " but this rank sends " + elements_text(f);
    } else {
      v.message = "recv from " + peer + which + "this rank's tensor holds " + elements_text(f) + " but " + peer +
                  " sends " + elements_text(*same_ordinal);
    }
    v.message += kSameCountAndDtype;
    return v;
  }
  return v;
}

std::string desync_message(uint64_t seq, const std::string& table, const std::string& pairs, bool found_by_detail) {
  std::string message = "the ranks disagree on collective #" + std::to_string(seq) +
                        " (a rank skipped or added a collective, or passed other arguments" +
                        (found_by_detail ? std::string() : "; DISTCOMM_DEBUG=DETAIL checks every op before it runs") +
                        "). Each rank's op there:\n" +
                        table + (pairs.empty() ? "" : "the all_to_all's splits do not pair up:\n" + pairs);
  // The tables' lines end in a newline; the message does not: printed as an error it would
  // leave an empty line ("[rank 1] " alone under the launcher).
  while (!message.empty() && message.back() == '\n') message.pop_back();
  return message;
}

std::string desync_message(uint64_t seq, const std::string& table, const std::string& pairs) {
  return desync_message(seq, table, pairs, false);
}

std::optional<Departure> departed_before(const OpFingerprint& op, const std::vector<std::optional<ProgressReport>>& by_rank,
                                         int mine) {
  if (op.p2p) return std::nullopt;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    const std::optional<ProgressReport>& report = by_rank[r];
    if (static_cast<int>(r) == mine || !report || !report->left) continue;
    // A report without a last collective is of a rank that issued none: the watch keeps the
    // last one apart from its ring of recent ops, so p2p ops after it cannot hide it.
    if (report->last_collective && report->last_collective->seq >= op.seq) continue;  // it took part
    // Sequence numbers are the group's, shared by its backends, and a backend without a
    // watch (nccl) reports nothing here: "none" is of this backend only.
    const std::string left = "rank " + std::to_string(r) + " left the group (closed it on its side) ";
    const std::string seq = "#" + std::to_string(op.seq);
    return Departure{static_cast<int>(r),
                     report->last_collective
                         ? left + "after " + report->last_collective->describe() + ", without issuing " + seq
                         : left + "without issuing " + seq + " (it issued no collective on this backend)"};
  }
  return std::nullopt;
}

std::string explain_wait(const OpFingerprint& op, const std::vector<std::optional<ProgressReport>>& by_rank,
                         int mine, const std::vector<std::string>& silent_notes) {
  Clauses clauses;
  if (!op.p2p) {
    for (size_t r = 0; r < by_rank.size(); ++r) {
      if (static_cast<int>(r) == mine) continue;
      const auto [singular, plural] = position(by_rank[r], op, note_of(silent_notes, r));
      clauses.add(static_cast<int>(r), singular, plural);
    }
    return clauses.text();
  }
  if (op.root < 0 || op.root >= static_cast<int>(by_rank.size())) return "";
  const std::optional<ProgressReport>& peer = by_rank[op.root];
  const std::string who = "rank " + std::to_string(op.root);
  if (!peer) return who + " " + did_not_report(note_of(silent_notes, static_cast<size_t>(op.root)));
  std::string with_me;
  for (const PendingOp& q : peer->pending) {
    const OpFingerprint& g = q.fingerprint;
    if (g.p2p && (g.root == mine || g.root < 0)) with_me += (with_me.empty() ? "" : ", ") + g.describe();
  }
  if (!with_me.empty()) return who + "'s pending transfers with this rank: " + with_me + stopped_ranks(by_rank, silent_notes);
  std::string s = who + " has no transfer with this rank pending";
  if (const PendingOp* c = peer->oldest_collective()) s += " (it waits in " + c->fingerprint.describe() + ")";
  const std::string chain = wait_chain(op.root, by_rank, mine, silent_notes);
  return s + (chain.empty() ? stopped_ranks(by_rank, silent_notes) : chain);
}

std::string explain_wait(const OpFingerprint& op, const std::vector<std::optional<ProgressReport>>& by_rank,
                         int mine) {
  return explain_wait(op, by_rank, mine, {});
}

std::string process_state_note(int pid, const std::optional<std::string>& stat) {
  const std::string process = "its process " + std::to_string(pid) + " on this host ";
  if (!stat) return process + "has ended (pid " + std::to_string(pid) + " is gone)";
  // "<pid> (<comm>) <state> ...": comm is the program's name, which may hold spaces and ')'.
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat->size() || (*stat)[paren + 1] != ' ') return "";
  switch ((*stat)[paren + 2]) {
    case 'T': return process + "is stopped (SIGSTOP or Ctrl-Z; SIGCONT resumes it)";
    case 't': return process + "is stopped by a debugger (traced)";
    case 'Z': return process + "has ended (pid " + std::to_string(pid) + " is a zombie its parent has not reaped)";
    default: return "";  // running or sleeping: it may be busy outside distcomm or stuck
  }
}

}  // namespace distcomm
