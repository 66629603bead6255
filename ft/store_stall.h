// A stall of the job's store, waited out by the caller's store calls (begin_step's, commit's).
//
// The store's server may stop answering for everyone for a while (node 0's launcher stopped
// or swapping): a call on a live connection then just waits for its answer, but one that
// must reconnect (the connection was dropped after an earlier call timed out, as a group's
// 50 ms wait slices do) fails within a second ("accepted the connection but did not answer
// the handshake", "cannot connect ... after 1 s"). Such a failure is asked again, as the
// liveness monitor keeps beating, until the store answers, or until the monitor takes this
// member for lost (no beat through for recovery_timeout: LivenessMonitor::lost_store),
// whichever comes first. What is never asked again: another job's store (StoreRefused), and
// a store whose host refuses connections (its process ended).
//
// Only for calls that may be asked twice: reads, set, compare_set (a repeat of one that got
// through returns what is there), and adds that only hand out a slot (an arrival, a joiner's
// number: a second one leaves a slot unwritten, which readers skip). Never for the add that
// counts a step's finishers: one whose answer was lost may have been counted, and asking it
// again could make the count reach the generation's size with a member missing
// (Manager::commit aborts the step instead).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>

#include "api/errors.h"

namespace distcomm {
namespace ft {

class LivenessMonitor;

// Something answered from the store's host, and nothing listens there any more: the
// store's process ended (node 0's launcher, or rank 0), not a partition nor a stall.
bool store_process_ended(const StoreError& e);

// Whether the store may answer again after `e`: not another job's store (StoreRefused),
// not a host that refuses connections.
bool store_may_answer_again(const StoreError& e);

// Runs `call` until it returns, asking it again (a pause between) after a StoreError of a
// store that may answer again, for at most `bound` after its first failure (the Manager
// gives its recovery timeout and a heartbeat timeout: the monitor decides first). Once
// `monitor` took this member for lost, the last StoreError is thrown with its words after
// it. Anything else is thrown as it is.
void through_store_stall(const LivenessMonitor& monitor, std::chrono::milliseconds bound,
                         const std::function<void()>& call);

// How a step's "abort|<why>" verdict starts when what failed the step was a stall of the
// store that was waited out (the count of its finishers without an answer; an op of a group
// the liveness monitor aborted for its silence): no member's step failed on its own, so it
// is not one of the kSameStepFailures that stop the job (StepKeepsFailing), and it ends a
// run of them (step_failures.cc). Three stalls in one step used to stop the job.
inline constexpr char kStoreStallAbort[] = "store stall: ";
inline bool is_store_stall_abort(const std::string& why) { return why.rfind(kStoreStallAbort, 0) == 0; }

// The same for a call with a result.
template <typename Fn>
auto through_store_stall(const LivenessMonitor& monitor, std::chrono::milliseconds bound, Fn&& fn)
    -> std::enable_if_t<!std::is_void_v<decltype(fn())>, decltype(fn())> {
  std::optional<decltype(fn())> result;
  through_store_stall(monitor, bound, std::function<void()>([&] { result.emplace(fn()); }));
  return std::move(*result);
}

}  // namespace ft
}  // namespace distcomm
