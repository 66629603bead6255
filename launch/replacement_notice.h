// What the launcher that serves a fault-tolerant job's store tells its members of the
// replacements it starts (--replace_after_s), so that survivors left fewer than their
// min_members wait for a replacement that is due instead of stopping the job a second before
// it comes (ft/replacement_wait.h reads it), and stop at once when none is.
//
//   ft/replaced_ranks      written once, before the first rank starts, when this launcher
//                          replaces failed ranks: its ranks' global numbers, "0,1,2,3".
//   ft/successor/<id>      written when the process of member <id> (one of its ranks, by the
//                          launcher's naming: "rank<R>", "rank<R>+<n>") has ended:
//                          "due|<successor's member id>|<its start, ms since the epoch>", or
//                          "none|<why>" (replacements used up, a refused joiner, nobody left
//                          to join, it exited 0). A later word replaces an earlier one (a due
//                          replacement cancelled).
//
// A survivor that finds a member of these ranks gone with no word yet knows that the word
// comes (the launcher sees the exit within milliseconds); a rank whose ids the program chose
// itself, or a machine whose launcher does not serve the store, says nothing, and its
// survivors stop as before. Best-effort: a store that cannot be reached is given up (the
// survivors then wait no longer than their recovery timeout).
//
// Header for the names (the launcher does not link ft/; ft/store_keys.h spells the same keys,
// and tests/ft/ft_replacement_wait_test.cc runs the two together), one source for the calls.
#pragma once

#include <chrono>
#include <string>

#include "api/process/fenced_member.h"
#include "launch/job_store.h"
#include "launch/launch_options.h"

namespace distcomm {
namespace launch {

inline std::string replaced_ranks_key() { return std::string(local::kFtStoreRoot) + "/replaced_ranks"; }
inline std::string successor_key(const std::string& member) {
  return std::string(local::kFtStoreRoot) + "/successor/" + member;
}

// Whether this launcher replaces failed ranks and serves the store that says so.
bool announces_replacements(const JobStore* store, const LaunchOptions& options);

// Before the first rank starts: which ranks this launcher replaces (nothing when it does not).
void announce_replaced_ranks(JobStore* store, const LaunchOptions& options);
// The process of member `ended` has ended, and member `successor` starts at `due`.
void announce_successor(JobStore* store, const LaunchOptions& options, const std::string& ended,
                        const std::string& successor, std::chrono::steady_clock::time_point due);
// The process of member `ended` has ended, and no replacement takes its place: `why`.
// Under --max_replacements=0, a `why` that says the rank's replacements are used up ("not
// replaced again: rank 1 has had 0 replacements ...") is written as what it is:
// "not replaced: replacements are off (--max_replacements=0)".
void announce_no_successor(JobStore* store, const LaunchOptions& options, const std::string& ended,
                           const std::string& why);

// Why a failed rank gets no replacement for want of replacements: "replacements are off
// (--max_replacements=0)" where none is ever started, else "rank 1 has had 3 replacements
// (--max_replacements=3)" -- "has had 0 replacements" read as if some had been due.
std::string replacements_used_up(int rank, int replaced, int max_replacements);

}  // namespace launch
}  // namespace distcomm
