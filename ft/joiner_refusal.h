// Which joiners to refuse when a step keeps failing (manager.h, StepKeepsFailing): a joiner
// whose step can never work with the members' (its DDP wraps one parameter more, say) makes
// every member's step throw, in every generation it is in. Stopping the whole job for it
// would throw away members that trained fine until it came; refusing it lets them go on.
//
// Decided from the store alone (the generations' member lists, which are never forgotten),
// so that every member, on whatever host, and the joiner itself decide the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/store/store.h"
#include "ft/generation.h"

namespace distcomm {
namespace ft {

// The joiners of a run of failures of one step: the members of `last` (the run's last
// generation) that were not members of the last generation before `first` (the run's
// first) that committed a step, where some of that generation's members are still there to
// go on. The generations between them failed the step too, whoever came or went. Empty
// otherwise (no such generation within kLookBack: the step never worked here; or the step
// already failed in that generation, every member of which is still here: the failures
// began before anyone came): then the joiners' arrival explains the failures no better than
// a program error.
constexpr uint64_t kLookBack = 64;
std::vector<std::string> joiners_behind_failures(Store& store, uint64_t first, const Generation& last);

// The dead mark of the joiners `refused` (of generation `last`, the run's last): it starts
// with kRefusedMark (liveness.h), so that they are left out of the next generation and
// never fenced (a refused joiner's Manager ends on its own). It names them, each with its
// group rank in `last`, as the cause, before the run's first failure (`first_why`, the
// words of the member that reported it).
std::string refusal_mark(uint64_t step, uint64_t first, const Generation& last, const std::vector<std::string>& refused,
                         const std::string& first_why);

// What a refused joiner's Manager throws (StepKeepsFailing), from its dead mark.
std::string refused_message(const std::string& id, const std::string& mark);

// Where a stopped job (StepKeepsFailing) says so, for the joiners that wait to be taken in
// (await_admission throws it at once instead of waiting out the recovery timeout).
void say_job_stopped(Store& store, const std::string& why) noexcept;

}  // namespace ft
}  // namespace distcomm
