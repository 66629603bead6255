// What gloo's exceptions mean in distcomm's terms.
//
// gloo reports every transport problem as gloo::IoException ("Timed out ..." for a wait
// that passed its deadline, anything else for a connection that broke or closed) and
// broken invariants as gloo::EnforceNotMet. The group's reaction to a failure (refusing
// later ops, cutting the connections, telling the peers) is api/group_failure.h's.
#pragma once

#include <chrono>
#include <exception>

namespace distcomm {
namespace gloo {

// Timeout for a gloo wait that timed out (naming `timeout`, the op's), PeerFailure for a
// lost or closed connection, distcomm errors as they are, anything else as Error.
std::exception_ptr to_distcomm_error(std::exception_ptr raw, std::chrono::milliseconds timeout);

}  // namespace gloo
}  // namespace distcomm
