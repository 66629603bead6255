// What the fault suite's cases check in an error message, and the times ranks leave for
// each other on the board.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "api/store/store.h"
#include "api/tensor.h"
#include "tests/testing/failure_checks.h"

namespace distcomm {
namespace fault {

using testing::Clock;
// What the cases use of tests/testing/failure_checks.h, named here once rather than in each.
using std::chrono::milliseconds;
using testing::expect_failure_within;
using testing::mark_done;
using testing::seconds_since;
using testing::wait_for_done;

// float32[n] of zeros.
Tensor floats(int64_t n);

// Expects "rank <culprit>" (as a whole rank number, not "rank 1/3", this rank's own prefix)
// followed within the same clause by one of `words` ("died", "closed", ...).
void expect_departure_named(const std::string& message, int culprit, const std::vector<std::string>& words,
                            const std::string& what);
// Expects a line of a Desync's table that starts with `who` ("rank 1:", "ranks [0, 2]:") and
// holds `op` ("all_reduce #1 float32[20] sum").
void expect_table_line(const std::string& message, const std::string& who, const std::string& op,
                       const std::string& what);
// Expects `text` in the message.
void expect_has(const std::string& message, const std::string& text, const std::string& what);

// Every rank of a group of `size` but `skip`, in order: the ranks a case's culprit waits
// for, or that wait for it.
std::vector<int> ranks_but(int size, int skip);
// "[0, 2, 3]": a list of ranks as errors and Desync tables write it (rank_list_text itself,
// "[0-47, 49-95]" past 8 ranks).
std::string rank_list(const std::vector<int>& ranks);

// What a stopped-rank case (fault_stop_resume.cc, fault_p2p_stopped.cc) checks in `who`'s
// error besides that it names rank `stopped`: that no other rank is named as one that did
// not report, and, given `pid` (every rank on one host sees the process; "" where a backend
// differs), that the rank's process `pid` is said to be stopped (SIGSTOP).
void expect_stopped_rank_alone_silent(const std::string& message, int stopped, const std::string& pid,
                                      const std::string& who);

// This moment, left on the board under `key`, and read back (waits for it).
void note_time(Store& board, const std::string& key);
Clock::time_point noted_time(Store& board, const std::string& key);

}  // namespace fault
}  // namespace distcomm
