// Which of the others' reports an explanation of a Timeout takes, and how its words say which
// of them are not fresh (stall_watch.cc's ask_everyone and explained).
//
// A Timeout's explanation asks every rank at the deadline and waits a fraction of the op's
// timeout for their answers (timeout_window.h). For a short timeout it also asked them early,
// at half the timeout, and once accepted those early answers as they were: where every rank
// had answered the early ask, the explanation took them at once, and said "rank 1 has not
// issued #17" of a rank that had issued #17 since (after the early ask, before the deadline).
// Now an answer to the explanation's own ask is awaited for the whole of its wait; an early
// answer stands in only for a rank that gives none in that time (a stopped rank, a rank whose
// watch does not look in time), and the words then say that it is from the early ask and
// when that ask was made.
//
// Core only, not for plugins.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/diagnostics/progress_report.h"

namespace distcomm {
namespace internal {

// Whether `report` answers the request `request` (or its rank left: a left report answers
// every request).
inline bool answers_request(const std::optional<ProgressReport>& report, int64_t request) {
  return report && (report->left || report->request >= request);
}

// Whether `report` answers an early ask made as request `early` (> 0; 0: none was made) but
// not `request`: a stand-in, used only where no fresh answer came.
inline bool answers_early_only(const std::optional<ProgressReport>& report, int64_t request, int64_t early) {
  return early > 0 && report && !answers_request(report, request) && report->request >= early;
}

// The ranks of by_rank (but `mine`) whose report is an early answer only: it answers an older
// request than this rank's own report (by_rank[mine], which carries the explanation's request).
std::vector<int> early_only_ranks(const std::vector<std::optional<ProgressReport>>& by_rank, int mine);

// The words that follow an explanation whose reports include early answers only (""
// where none): "; rank 1 answered this rank's ask of 1.2 s before the op's deadline, not
// the ask of its Timeout: its word above is from then and may be out of date".
// asked_before_deadline: how long before the op's deadline the early ask was made (negative:
// after it).
std::string early_answers_note(const std::vector<std::optional<ProgressReport>>& by_rank, int mine,
                               std::chrono::milliseconds asked_before_deadline);

}  // namespace internal
}  // namespace distcomm
