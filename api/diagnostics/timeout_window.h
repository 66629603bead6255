// How long the stall watch lets an op's Timeout wait, past the op's deadline, for the
// watch to step in and for the explanation ("rank 1 has not issued #1 yet"), scaled by the
// op's own timeout: a user who sets 100 ms (a test, a health check) wants the error near
// 100 ms, and a fixed tick-sized wait held it up to a second late (1005 ms on gloo, 541 ms
// on shm, for a 100 ms timeout). docs/failures.md ("How late a Timeout fires") says what
// these add up to.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace distcomm {
namespace internal {

// The least time an explanation waits for the others' answers, however short the timeout:
// a round trip or two to the store, and the answers of ranks whose watch happens to look
// meanwhile (the others answer at their next tick, up to half a second away, so a rank
// asked only now is often named as not reporting; the early ask below avoids that).
inline constexpr std::chrono::milliseconds kShortestExplainWait{100};
// The watch's slack past a deadline (for a backend whose own wait reports the Timeout
// itself) is at most this, and never less than kShortestSlack.
inline constexpr std::chrono::milliseconds kLongestSlack{200};
inline constexpr std::chrono::milliseconds kShortestSlack{50};

// How long the explanation of an op's Timeout waits for the others' answers: `longest`
// (a tick and half a second: every rank that can answer has), cut to half the op's
// timeout, but not below kShortestExplainWait. A timeout of 0 (none) gets `longest`.
inline std::chrono::milliseconds explain_wait_for(std::chrono::milliseconds timeout,
                                                  std::chrono::milliseconds longest) {
  if (timeout.count() <= 0) return longest;
  return std::min(longest, std::max(kShortestExplainWait, timeout / 2));
}

// How much later than an op's deadline the watch fails it, where the backend's own wait has
// not (gloo leaves the deadline to the watch; shm and mpi report it themselves, and the
// slack keeps the watch from racing them): a quarter of the timeout, within
// [kShortestSlack, kLongestSlack].
inline std::chrono::milliseconds deadline_slack_for(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return kLongestSlack;
  return std::min(kLongestSlack, std::max(kShortestSlack, timeout / 4));
}

// The soonest an op is compared with the others' (a report a moment old may show an op that
// has since matched): an op with a short timeout is compared at half of it, not before this.
inline constexpr std::chrono::milliseconds kShortestProbe{500};

// When an op with this timeout is first compared with the others' (probe_after: the
// watch's StallWatchOptions::probe_after).
inline std::chrono::milliseconds probe_after_for(std::chrono::steady_clock::duration timeout,
                                                 std::chrono::milliseconds probe_after) {
  return std::min(probe_after,
                  std::max(kShortestProbe, std::chrono::duration_cast<std::chrono::milliseconds>(timeout / 2)));
}

// How long after its issue the watch asks the others for their reports ahead of an op's
// deadline (once), so that their answers are on the board when its Timeout is explained:
// half its timeout, for a timeout whose first probe (probe_after_for) leaves the others
// less than a tick and half a second to answer before the deadline. Else never (max): the
// probe asks in time, and the explanation's own wait is not cut (explain_wait_for), so an
// answer older than the explanation's own request is never needed. An answer to the early
// ask stands in only for a rank that does not answer the explanation's own ask within its
// wait, and the words say so and when it was asked (stall_watch_answers.h): it may be from
// before that rank issued the op.
inline std::chrono::milliseconds early_ask_after(std::chrono::milliseconds timeout,
                                                 std::chrono::milliseconds probe_after,
                                                 std::chrono::milliseconds tick) {
  const auto answer_time = tick + std::chrono::milliseconds(500);
  if (timeout.count() <= 0 || probe_after_for(timeout, probe_after) + answer_time <= timeout) {
    return std::chrono::milliseconds::max();
  }
  return timeout / 2;
}

// When the watch next needs to look at an op for its probes: its first probe, or its early
// ask where that comes first and has not been made (`not_asked`).
inline std::chrono::milliseconds first_look_after(std::chrono::milliseconds timeout,
                                                  std::chrono::milliseconds probe_after,
                                                  std::chrono::milliseconds tick, bool not_asked) {
  const std::chrono::milliseconds first = probe_after_for(timeout, probe_after);
  return not_asked ? std::min(first, early_ask_after(timeout, probe_after, tick)) : first;
}

// Whether an op that has waited `waited` is due its early ask (`asked`: 0 until then); if
// so, marks it as under way (-1) until the look that asks sets the request's count.
inline bool take_early_ask(int64_t& asked, std::chrono::steady_clock::duration waited, std::chrono::milliseconds timeout,
                           std::chrono::milliseconds probe_after, std::chrono::milliseconds tick) {
  if (asked != 0 || std::chrono::duration_cast<std::chrono::milliseconds>(waited) < early_ask_after(timeout, probe_after, tick)) {
    return false;
  }
  asked = -1;
  return true;
}

// How long one look of the watch at the board may take: at most two rounds of asking
// everyone (a probe that finds a mismatch, then the "has waited" line), each a tick and a
// half second, and 10 s for the store's round trips. A board whose server does not answer
// (its process stopped, its host frozen) then costs a tick this long, not the store's
// timeout (the group's, 30 minutes): the watch goes on failing late ops and saying whom they
// wait for. Generous, not tight: a look cut short closes the connection the process's store
// calls share, and a server merely slow (a thousand ranks asking at once) must not be cut.
inline constexpr std::chrono::milliseconds kBoardRoundTrips{10000};
inline std::chrono::milliseconds board_look_limit(std::chrono::milliseconds tick) {
  return 2 * (tick + std::chrono::milliseconds(500)) + kBoardRoundTrips;
}

}  // namespace internal
}  // namespace distcomm
