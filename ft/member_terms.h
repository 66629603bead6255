// A step's error said in the terms of its generation's members.
//
// The backends name the ranks of the group they run ("shm: rank 4 (pid 5908) died"), and a
// generation's group renumbers its members: after rank1 was lost, member "rank5" is group
// rank 4. A failure line that began with the reporting member's id then read "rank4: ...
// rank 4 (pid 5908) died", two ranks that are two processes (found by a chaos soak). The
// manager writes a step's failure with every group rank named as its member ("member 'rank5'
// (group rank 4, pid 5908) died"), and the reporter as "member 'rank4': ".
#pragma once

#include <string>
#include <vector>

namespace distcomm {
namespace ft {

// `text` with each "rank <N>" of a group whose ranks are `members` (in rank order) said as
// "member '<id>' (group rank <N>)", a parenthesis that follows merged in ("rank 4 (pid 5908)"
// -> "member 'rank5' (group rank 4, pid 5908)"; "rank 0/5" -> "... (group rank 0/5)"). A
// "rank" named by another word ("local rank 1", "world rank 3", "group rank 2") and numbers
// past the group are left as they are; where a list of ranks remains ("ranks [1, 2]", "ranks
// 1, 3"), the group's ranks and members are appended once ("[group ranks: 0 rank0, 1 rank2,
// ...]").
std::string in_member_terms(const std::string& text, const std::vector<std::string>& members);

}  // namespace ft
}  // namespace distcomm
