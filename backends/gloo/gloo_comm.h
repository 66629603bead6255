// One group's gloo connections: a TCP device on the chosen interface and a full mesh of
// pairs, set up through the group's own store, behind an InterruptibleContext; and, beyond
// one rank, the watch that tells a peer that died from one that closed the group.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>

#include <gloo/transport/context.h>
#include <gloo/transport/device.h>

#include "api/plugin/backend.h"
#include "backends/gloo/gloo_config.h"
#include "backends/gloo/gloo_connection_watch.h"
#include "backends/gloo/gloo_interruptible_context.h"
#include "backends/gloo/gloo_rendezvous.h"

namespace distcomm {
namespace gloo {

// gloo's rendezvous context over an InterruptibleContext, plus access to the timeout its
// transport applies to waits that gloo's algorithms start without one (gloo::allreduce's
// bcube path does): the worker sets it to each op's timeout, so that every op honours its own.
class GlooContext : public RendezvousContext {
 public:
  using RendezvousContext::RendezvousContext;
  void set_transport_timeout(std::chrono::milliseconds timeout) {
    if (transport_) transport_->set_timeout(timeout);
  }
  // The connected TCP context becomes this context's transport, behind an InterruptibleContext.
  void adopt_connections(std::shared_ptr<::gloo::transport::Device> device,
                         std::shared_ptr<::gloo::transport::Context> tcp) {
    transport_ = std::make_shared<InterruptibleContext>(std::move(tcp));
    adopt(std::move(device), transport_);
  }
  InterruptibleContext* transport() const { return transport_.get(); }

 private:
  std::shared_ptr<InterruptibleContext> transport_;
};

class GlooComm {
 public:
  // The rendezvous (gloo_rendezvous.h): every rank of the group constructs one. It ends
  // within what is left of the group's creation deadline (options.config, init_wait.h).
  // Throws InvalidArgument for a bad interface, Timeout naming the peers that did not
  // publish or connect, PeerFailure naming one that cannot be reached.
  GlooComm(const BackendOptions& options, const GlooConfig& config);
  ~GlooComm();

  const std::shared_ptr<GlooContext>& context() const { return context_; }
  // "address 127.0.0.1 (the route to master localhost)": for messages.
  const std::string& listening_on() const { return listening_on_; }
  // Null in a group of one.
  ConnectionWatch* connections() const { return connections_.get(); }

  // Closes the group's connections, so that peers blocked on this rank see them end, and
  // makes every wait on them, now or later, throw `why` (InterruptibleContext::interrupt).
  // Idempotent; never waits on a peer.
  void interrupt(std::exception_ptr why);

 private:
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<GlooContext> context_;
  std::string listening_on_;
  std::unique_ptr<ConnectionWatch> connections_;
};

}  // namespace gloo
}  // namespace distcomm
