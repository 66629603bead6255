// A rank that cannot take part in a collective call of its group at all (it aborted the
// group: ProcessGroup::abort) posts so, in place of its part, where the others wait for it:
// new_group's member lists (member_lists.h), the host exchange's round of split,
// split_group and DeviceMesh (host_exchange.h). The others then end at once with a
// PeerFailure quoting it, rather than waiting for it until their timeout. One text and one
// error for every such place, so that every subgroup maker says it alike.
#pragma once

#include <string>

#include "api/errors.h"

namespace distcomm {

// What such a rank posts: `why` ("it aborted group 'world' (ProcessGroup::abort) before
// this call"), marked so that nothing a rank posts otherwise reads as it.
std::string cannot_take_part_text(const std::string& why);
// Whether a post is one.
bool says_cannot_take_part(const std::string& posted);
// What a rank that met it ends with: "<call>: rank <rank> cannot take part: <why>" (call:
// "new_group #0 on group 'world'"; rank: the one that posted, as the call numbers it).
PeerFailure cannot_take_part_failure(const std::string& call, int rank, const std::string& posted);

}  // namespace distcomm
