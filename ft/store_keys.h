// The keys a fault-tolerant job keeps in its store, under "ft/" (one definition, so the
// manager, the liveness monitor and the generation's forming never disagree on a name).
//
//   member/<id>                 the member's MemberRecord (written once, when it starts)
//   hb/<id>                     its heartbeat: a counter it adds to every interval
//   dead/<id>                   why it is known to be gone (whoever learns it first)
//   fenced/<id>                 its process and that first cause, written by whoever took it
//                               for gone (never by itself): its launcher kills that process
//                               (api/process/fenced_member.h)
//   joiners                     how many processes have asked to join (a counter)
//   joiner/<n>                  the n-th one's id (from 1)
//   latest                      the newest generation formed (its number)
//   gen/<g>/arrivals            how many candidates arrived to form generation g (a counter)
//   gen/<g>/arrival/<n>         the n-th one's id
//   state                       the state's dtypes and shapes, as the first member to form a
//                               generation describes them (a joiner's must be the same)
//   finished                    written by ft::Manager::finish: training has ended
//   stopped                     why the job stopped (StepKeepsFailing, too few members left,
//                               every member gave up forming; first wins): a waiting joiner ends
//   gave_up/<id>                the member gave up forming a generation (its group's creation
//                               failed for good): it ends; once every member of that generation
//                               did (or is dead), the last one writes stopped
//   gen/<g>/members             "<committed steps>|<id>,<id>,..." (first wins)
//   gen/<g>/needs_state/<id>    a member of g that has no state yet (a joiner)
//   gen/<g>/group/...           generation g's ProcessGroup
//   gen/<g>/step/<s>/done       members that finished step s (a counter)
//   gen/<g>/step/<s>/verdict    "commit|<joiners>" or "abort|<why>" (compare_set: first wins)
//   replaced_ranks              written by the launcher that serves the store when it replaces
//                               failed ranks (--replace_after_s): its ranks, "0,1,2,3"
//   successor/<id>              written by that launcher when member <id>'s process ended:
//                               "due|<successor id>|<start, ms since the epoch>" or "none|<why>"
//                               (launch/replacement_notice.h spells both; replacement_wait.h)
//   forgotten_below             the generations below it are forgotten: their keys deleted but
//                               members (forgetting.h), once a generation two later has
//                               committed a step; a generation's steps are deleted two steps
//                               behind (manager.cc, Manager::forget)
#pragma once

#include <cstdint>
#include <string>

#include "api/process/fenced_member.h"

namespace distcomm {
namespace ft {
namespace keys {

inline constexpr const char* kRoot = local::kFtStoreRoot;  // read by the launcher too
inline constexpr char kGroupName[] = "ft";  // each generation's ProcessGroup, in its own namespace
inline std::string member(const std::string& id) { return "member/" + id; }
inline std::string heartbeat(const std::string& id) { return "hb/" + id; }
inline std::string dead(const std::string& id) { return "dead/" + id; }
inline std::string fenced(const std::string& id) { return local::kFencedFolder + id; }
inline constexpr char kJoiners[] = "joiners";
inline std::string joiner(int64_t n) { return "joiner/" + std::to_string(n); }
inline constexpr char kLatest[] = "latest";
inline constexpr char kState[] = "state";
inline constexpr char kFinished[] = "finished";
inline constexpr char kStopped[] = "stopped";
inline std::string gave_up(const std::string& id) { return "gave_up/" + id; }
inline constexpr char kForgottenBelow[] = "forgotten_below";
inline constexpr char kReplacedRanks[] = "replaced_ranks";
inline std::string successor(const std::string& id) { return "successor/" + id; }
inline std::string gen(uint64_t g) { return "gen/" + std::to_string(g) + "/"; }
inline std::string arrivals(uint64_t g) { return gen(g) + "arrivals"; }
inline std::string arrival(uint64_t g, int64_t n) { return gen(g) + "arrival/" + std::to_string(n); }
inline std::string members(uint64_t g) { return gen(g) + "members"; }
inline std::string needs_state(uint64_t g, const std::string& id) { return gen(g) + "needs_state/" + id; }
inline std::string group_prefix(uint64_t g) { return gen(g) + "group"; }
inline std::string step(uint64_t g, uint64_t s) { return gen(g) + "step/" + std::to_string(s) + "/"; }
inline std::string done(uint64_t g, uint64_t s) { return step(g, s) + "done"; }
inline std::string verdict(uint64_t g, uint64_t s) { return step(g, s) + "verdict"; }

}  // namespace keys
}  // namespace ft
}  // namespace distcomm
