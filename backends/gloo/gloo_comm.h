// One group's gloo connections: a TCP device on the chosen interface and a full mesh of
// pairs, set up through the group's own store.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <gloo/transport/context.h>
#include <gloo/transport/device.h>

#include "api/backend.h"
#include "backends/gloo/gloo_rendezvous.h"

namespace distcomm {
namespace gloo {

// gloo's rendezvous context, plus access to the timeout its transport applies to waits
// that gloo's algorithms start without one (gloo::allreduce's bcube path does): the worker
// sets it to each op's timeout, so that every op honours its own.
class GlooContext : public RendezvousContext {
 public:
  using RendezvousContext::RendezvousContext;
  void set_transport_timeout(std::chrono::milliseconds timeout) {
    if (transportContext_) transportContext_->setTimeout(timeout);
  }
};

class GlooComm {
 public:
  // The rendezvous (gloo_rendezvous.h): every rank of the group constructs one. It ends
  // within what is left of the group's creation deadline (options.config, init_wait.h).
  // Throws InvalidArgument for a bad interface, Timeout naming the peers that did not
  // publish or connect, PeerFailure naming one that cannot be reached.
  explicit GlooComm(const BackendOptions& options);

  const std::shared_ptr<GlooContext>& context() const { return context_; }
  // "address 127.0.0.1 (the route to master localhost)": for messages.
  const std::string& listening_on() const { return listening_on_; }

  // Fails everything blocked on this group's connections and closes them, so that the
  // worker thread returns from a collective that will never finish and peers blocked on
  // this rank see the connections end. Idempotent; never waits on a peer.
  void interrupt();

 private:
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<GlooContext> context_;
  std::string listening_on_;
};

}  // namespace gloo
}  // namespace distcomm
