#include "api/diagnostics/stall_watch_answers.h"

#include <cstdio>
#include <cstdlib>

#include "api/diagnostics/duration_text.h"
#include "api/diagnostics/op_fingerprint.h"

namespace distcomm {
namespace internal {
namespace {

// "0.35 s" under a second (an early ask comes at half a timeout under 2 s, and a 100 ms
// timeout's is 50 ms before its deadline: "0.1 s" would round it away), else seconds_text.
std::string ask_time_text(std::chrono::milliseconds ms) {
  const long long n = std::llabs(static_cast<long long>(ms.count()));
  if (n >= 1000) return seconds_text(std::chrono::milliseconds(n));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", static_cast<double>(n) / 1000.0);
  return buf;
}

}  // namespace

std::vector<int> early_only_ranks(const std::vector<std::optional<ProgressReport>>& by_rank, int mine) {
  std::vector<int> early;
  if (mine < 0 || mine >= static_cast<int>(by_rank.size()) || !by_rank[mine]) return early;
  const int64_t asked_now = by_rank[mine]->request;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (static_cast<int>(r) != mine && by_rank[r] && !answers_request(by_rank[r], asked_now)) {
      early.push_back(static_cast<int>(r));
    }
  }
  return early;
}

std::string early_answers_note(const std::vector<std::optional<ProgressReport>>& by_rank, int mine,
                               std::chrono::milliseconds asked_before_deadline) {
  const std::vector<int> early = early_only_ranks(by_rank, mine);
  if (early.empty()) return "";
  const bool one = early.size() == 1;
  const std::string when = ask_time_text(asked_before_deadline) +
                           (asked_before_deadline.count() >= 0 ? " before" : " after") + " the op's deadline";
  return "; " + ranks_text(early) + " answered this rank's ask of " + when +
         ", not the ask of its Timeout: " + (one ? "its" : "their") + " word above is from then and may be out of date";
}

}  // namespace internal
}  // namespace distcomm
