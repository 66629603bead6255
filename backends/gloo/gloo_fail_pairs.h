// Failing every connection of a gloo TCP context from outside gloo's threads, without a
// TCP reset.
#pragma once

#include <vector>

#include <gloo/transport/context.h>

namespace distcomm {
namespace gloo {

// gloo has no public call that fails a context's connections from another thread; Pair::close()
// resets the connection (SO_LINGER 0). It does one thing when a wait on an unbound buffer
// times out: it signals every pair of the context ("Application timeout caused pair
// closure"), which fails their pending operations, wakes a connect still waiting, and
// closes each socket plainly (a peer reads an end of stream). So this posts a receive on
// a slot nobody ever sends to, from the first peer of `order` whose pair takes it, and
// waits one millisecond for it. A pair already failed refuses the receive; put connected
// peers first, since posting to a pair that is still listening writes to its listening
// socket (EPIPE, which gloo ignores once SIGPIPE is: gloo_comm.cc).
void fail_every_pair(::gloo::transport::Context& context, const std::vector<int>& order);

}  // namespace gloo
}  // namespace distcomm
