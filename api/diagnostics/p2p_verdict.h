// The stall watch's verdict on the ranks' reports: progress_report.h's compare_reports, less
// the point-to-point size mismatches it found by pairing ordinals that cannot be compared.
//
// compare_reports pairs a pending send with its peer's pending recv by (tag, ordinal). Outside
// DISTCOMM_DEBUG=DETAIL the two sides' ordinals for a tag agree only while they restarted its
// count after the same drops (op_numbering.h, PendingOp::ordinal_epoch): a pair that used
// more than 256 tags in different orders may number one transfer 0 on one side and 5 on the
// other, and then a legal transfer that waits past probe_after was paired with an unrelated
// one of another size and failed the whole group as a mismatch. Here such a verdict gives
// way: the op just waits (its Timeout, explained as usual, names the peer's pending transfers).
//
// Core only, not for plugins: the stall watch calls it.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <vector>

#include "api/diagnostics/progress_report.h"

namespace distcomm {

// compare_reports(by_rank, mine, min_waiting_ms), but a kSizeMismatch whose transfers'
// ordinals are not comparable (ordinals_comparable) is dropped, and the comparison goes on
// without that op of this rank (a later op of it may still be a real mismatch).
Verdict comparable_verdict(const std::vector<std::optional<ProgressReport>>& by_rank, int mine,
                           int64_t min_waiting_ms);

// Whether the reports' pending transfers from `sender` to `receiver` with `tag` (the sender's
// sends, the receiver's recvs from it: those compare_reports pairs by ordinal) all carry the
// same ordinal epoch. True where either side shows none (nothing to pair).
bool ordinals_comparable(const std::vector<std::optional<ProgressReport>>& by_rank, int sender, int receiver, int tag);

// For a Timeout's explanation: comparable_verdict(by_rank, mine, 0), but no verdict where a
// report answers an older request than this rank's own report does (by_rank[mine].request):
// an answer to the op's early ask (timeout_window.h), accepted so that the Timeout's words
// come near its deadline, may be from before that rank issued and matched the op (a rank
// that said "not issued #N" at 1.0 s may have issued it at 1.2 s). Words may say what an old
// answer showed; an InvalidArgument or a Desync, which names a mistake, must rest on answers
// of now.
Verdict explanation_verdict(const std::vector<std::optional<ProgressReport>>& by_rank, int mine);

// The error a verdict names: Desync, InvalidArgument for a size mismatch; null for none.
std::exception_ptr verdict_error(const Verdict& v);

}  // namespace distcomm
