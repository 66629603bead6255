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
// generation, each of the run having its members) that were not in the generation before
// `first` (the run's first), where that generation committed a step (it trained fine
// without them), and some of its members are still there to go on. Empty otherwise: then
// nothing but the joiners' arrival can explain the failures no better than a program error.
std::vector<std::string> joiners_behind_failures(Store& store, uint64_t first, const Generation& last);

// The dead mark of a refused joiner: it starts with kRefusedMark (liveness.h), so that it
// is left out of the next generation and never fenced (its Manager ends on its own).
std::string refusal_mark(uint64_t step, uint64_t first, uint64_t last, const std::string& first_why);

// What a refused joiner's Manager throws (StepKeepsFailing), from its dead mark.
std::string refused_message(const std::string& id, const std::string& mark);

// Where a stopped job (StepKeepsFailing) says so, for the joiners that wait to be taken in
// (await_admission throws it at once instead of waiting out the recovery timeout).
void say_job_stopped(Store& store, const std::string& why) noexcept;

}  // namespace ft
}  // namespace distcomm
