// What a joiner waiting to be taken in (await_admission, generation.h) says every report
// interval: a member waiting to join a running job used to wait in silence up to its
// recovery timeout, with nothing to tell a slow step boundary from members that will never
// take it in.
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

}  // namespace ft
}  // namespace distcomm
