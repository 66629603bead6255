// What a joiner says while it waits, every report interval: to be taken in
// (await_admission, generation.h), and, before that, for the job's first generation
// (await_first_generation, as its Manager is made). A member waiting to join a running job
// used to wait in silence up to its recovery timeout (or, before the first generation, its
// op timeout: 30 minutes by default), with nothing to tell a slow step boundary, or first
// ranks slow to start, from members that will never take it in.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "api/store/store.h"

namespace distcomm {
namespace ft {

// "ft: joiner 'j' has waited 30.0 s to be taken in by generation 4, for rank0, rank2 to
// arrive (generation 3's members, who take waiting joiners in at the end of a step) (it
// gives up in 30.0 s)": the members of generation g-1 not yet arrived at g, read from the
// store now (two requests and one per arrival; only once a report interval). A store error
// is said in the line instead (the poll that follows meets it too).
std::string admission_wait_line(Store& store, const std::string& me, uint64_t g,
                                std::chrono::steady_clock::duration waited, std::chrono::steady_clock::duration left);

// "ft: joiner 'j' has waited 30.0 s for the job's first generation to be formed, before it
// can check its state against the members' (no generation yet; arrived at generation 1:
// rank0) (it gives up in 1770.0 s)": what the store says now of the first generation (the
// latest generation and its members, should it have been formed meanwhile; else who has
// arrived at it). A store error is said in the line instead.
std::string first_generation_wait_line(Store& store, const std::string& me, std::chrono::steady_clock::duration waited,
                                       std::chrono::steady_clock::duration left);

// A joiner's Manager, as it is made: waits until the job's first generation stands
// (keys::kLatest), up to `timeout`, logging first_generation_wait_line every `report_every`.
// Throws Timeout at the deadline, saying what was last known.
void await_first_generation(Store& store, const std::string& me, std::chrono::milliseconds timeout,
                            std::chrono::milliseconds report_every);

}  // namespace ft
}  // namespace distcomm
