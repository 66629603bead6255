// What gloo's exceptions mean in distcomm's terms.
//
// gloo reports every transport problem as gloo::IoException ("Timed out ..." for a wait
// that passed its deadline, anything else for a connection that broke or closed) and
// broken invariants as gloo::EnforceNotMet. The group's reaction to a failure (refusing
// later ops, cutting the connections, telling the peers) is api/diagnostics/group_failure.h's.
#pragma once

#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/diagnostics/group_failure.h"
#include "api/work.h"

namespace distcomm {
namespace gloo {

class ConnectionWatch;
struct LostPeer;

// Timeout for a gloo wait that timed out (naming `timeout`, the op's), PeerFailure for a
// lost or closed connection, distcomm errors as they are, anything else as Error.
std::exception_ptr to_distcomm_error(std::exception_ptr raw, std::chrono::milliseconds timeout);

// Whether a closed connection's gloo message says this rank closed it: gloo closes every
// connection of a group with that message when one of its waits times out, which is also
// how InterruptibleContext::interrupt closes them.
bool closed_by_this_rank(const std::string& gloo_message);

// The ranks whose connections closed without a goodbye (gloo_connection_watch.h):
// "rank 1 closed its connection (the process died or exited)".
PeerFailure peers_died(const std::vector<int>& ranks);
// The peers a connection watch lost (on_lost): those whose connections closed as
// peers_died says; one whose process ended while its connection stays open as
// "rank 1 (pid 4242) died: its process ended while a process it forked still holds its
// connections open"; several of which some still have connections open as "ranks [1, 2]
// (pids 4242, 4243) died: their processes ended on this host, each while a process it
// forked still holds its connections open" (not "closed their connections": no connection
// closed).
// Peers that went after another had left cleanly (each LostPeer's after_departure_of)
// are put behind that departure: "rank 0 left the group (closed it with no op in flight)
// while the others still needed it; rank 1 went after that (most likely failing because of
// it)".
PeerFailure peers_lost(const std::vector<LostPeer>& peers);
// The rank whose clean departure came before every one of `peers` went, or -1.
int departure_behind(const std::vector<LostPeer>& peers);
// The culprit to give GroupFailure::record for them: the one rank when there is one. Of
// several, some may only have cut their connections after failing themselves, because of
// another (the first failing rank's record, on the board, says which): then none is named
// and GroupFailure looks that record up.
int culprit_among(const std::vector<int>& ranks);

// What an op that gloo failed ends with: raw in distcomm's terms, recorded as the group's
// failure (GroupFailure::record). A connection lost to a peer is explained by which peer
// closed it and how (connections, when given); a peer that died is the culprit. peer: the
// one rank a send or recv exchanges with (-1: a collective, or a recv from any source),
// the only rank whose going can fail it: another's clean departure is no failure of it,
// and does not make the peer's death a consequence.
std::exception_ptr record_op_failure(GroupFailure& failure, ConnectionWatch* connections, std::exception_ptr raw,
                                     std::chrono::milliseconds timeout, const Work& op, int peer = -1);

}  // namespace gloo
}  // namespace distcomm
