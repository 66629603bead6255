// A gloo group's rendezvous: every pair of the full mesh connected within one deadline.
//
// gloo's own (rendezvous::Context::connectFullMesh) takes each peer in turn and waits for
// each up to the context's timeout, and its TCP pair, when it is the listening side, waits
// five times that for the peer to connect: a peer that published its address and never
// connected (it crashed, or the address was stale) kept init 50 s against a 10 s timeout,
// and nothing said whom it waited for. This one
//   - publishes this rank's pair addresses under "addresses/<rank>" in the group's store,
//     with its process (host, PID namespace, pid),
//   - waits for every peer's at once, naming those missing every report interval,
//   - connects the pairs from a few threads at once (each connect blocks until the peer's
//     side is there), naming the peers not yet connected every report interval,
//   - and when the deadline passes closes the pairs still waiting, so no thread is left
//     blocked, and throws Timeout naming their ranks. A peer that refuses the connection
//     (its process has gone) is a PeerFailure naming it, at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include "api/group/init_wait.h"
#include "api/store/store.h"

namespace distcomm {
namespace gloo {

// The context's transport, connected here and given to the context by adopt().
class RendezvousContext : public ::gloo::rendezvous::Context {
 public:
  using ::gloo::rendezvous::Context::Context;

 protected:
  void adopt(std::shared_ptr<::gloo::transport::Device> device,
             std::shared_ptr<::gloo::transport::Context> transport) {
    device_ = std::move(device);
    transportContext_ = std::move(transport);
  }
};

// Connects a transport context of `device` (rank and size: context's) to every other rank of
// the group through store (private to this group and backend) within wait's deadline, and
// returns it, its timeout the context's. Fills same_host_pids, by rank, with the pid of each
// peer in this process's PID namespace and network namespace, with this process's
// DISTCOMM_HOST_ID (0 for the others and this rank): the processes the connection watch
// can ask about (api/plugin/process_watch.h). A peer told it is on another host is judged
// by its connections and the group's timeouts alone, as on another machine. On failure no thread of this
// call is left running and the pairs are closed.
std::shared_ptr<::gloo::transport::Context> connect_full_mesh(
    const RendezvousContext& context, const std::shared_ptr<::gloo::transport::Device>& device, Store& store,
    const InitWait& wait, std::vector<int>* same_host_pids);

}  // namespace gloo
}  // namespace distcomm
