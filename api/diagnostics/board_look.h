// What the stall watch reads of its group's board at every tick, and how it words a look
// that failed. The core's own (not a public header).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>

#include "api/store/store.h"

namespace distcomm {
namespace internal {

struct IdleLook {
  int64_t requests = 0;                        // the request count (0 before any request)
  std::optional<std::string> failure_record;  // what a failed rank published, if any
};

// The request count under request_key and the group's failure record under failure_key, in
// one request: a look used to start a thread and make three store calls, 0.07% of a core
// per group and rank with nothing in flight (hundreds of live groups cost a core). A read
// that `answer_wait` cuts short while the store holds it calls `unanswered` (the board is
// then taken for silent, as a failure's own read would take it) before the Timeout goes
// on; any store error goes on as thrown. A read that a sooner deadline around it cuts short
// (the watch's, by an op's deadline) does not: the store had less than `answer_wait` to
// answer, and taking it for silent would cost that op's Timeout its explanation and the
// group its published record. Its time counts toward the next look's wait instead (any
// watch's over the same store, begun within half a second): looks cut one after another
// for `answer_wait` in all, a stopped server under a hierarchy's levels, still call it.
IdleLook read_idle_look(Store& board, const std::string& request_key, const std::string& failure_key,
                        std::chrono::milliseconds answer_wait, const std::function<void()>& unanswered);

// Why a look at the board failed, as the "has waited" line says it: a look its deadline cut
// short means the store's server did not answer, which is what a user must be told plainly
// (the process serving it stopped, or its host frozen), not only the store call's words.
std::string look_failure_text(const std::exception& e);

}  // namespace internal
}  // namespace distcomm
