// Aborting (or closing) a backend's communicators all at once, never one after another.
//
// ncclCommAbort waits for the work queued on its communicator's stream. A kernel there may
// wait behind another communicator's kernel -- `send(x)->wait(); all_reduce(y)` with the
// peer dead puts the group's all_reduce behind the pair's stuck send -- and that one ends
// only when its own communicator is aborted. Aborted in sequence, in the wrong order, the
// first abort never returns, and whoever called it (the watchdog, abort(), destroy) hangs.
// So each abort runs on a thread of its own: the failing communicator's first, the others
// once it has returned or, if it has not within a head start (it may be the one waiting),
// all together; the caller waits for all of them up to a bound, and an abort still running
// then finishes on its own thread, which holds its communicator.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

// How long the others wait for the first abort before they start regardless.
constexpr std::chrono::milliseconds kFirstAbortHeadStart{500};

// Runs every task on a thread of its own: tasks[0] first, the others together once it has
// returned or `head_start` (at most half the bound) has passed. Waits until all have returned or `bound` (counted
// from the call) has passed; returns the indices of the tasks still running then, which go
// on alone. A task that throws counts as returned (nothing escapes its thread).
std::vector<size_t> run_concurrently(std::vector<std::function<void()>> tasks, std::chrono::milliseconds bound,
                                     std::chrono::milliseconds head_start = std::chrono::milliseconds::zero());

// comm->abort(reason) for every communicator (nulls, repeats and communicators already
// aborted skipped: an abort keeps its first reason), comms[0] first,
// as run_concurrently with kFirstAbortHeadStart. Returns the labels of those whose abort had not returned within
// `bound`, and says so on this rank's log.
std::vector<std::string> abort_concurrently(const std::vector<std::shared_ptr<WatchedComm>>& comms,
                                            const std::string& reason, std::chrono::milliseconds bound);

// The same for communicators of a more derived type (a backend's registry).
template <typename Comm>
std::vector<std::string> abort_concurrently(const std::vector<std::shared_ptr<Comm>>& comms, const std::string& reason,
                                            std::chrono::milliseconds bound) {
  return abort_concurrently(std::vector<std::shared_ptr<WatchedComm>>(comms.begin(), comms.end()), reason, bound);
}

}  // namespace nccl
}  // namespace distcomm
