// A gloo group's transport context, in front of gloo's TCP one, so that interrupting the
// group ends every wait on its connections.
//
// gloo wakes a connection's pending operations when it closes, but not a receive already
// under way (the message's first bytes read, the rest never to come) nor a send whose
// bytes are partly written: both would wait out the op's timeout. distcomm cannot reach
// them inside gloo, so every unbound buffer the group's ops get (gloo's algorithms and
// distcomm's own transfers alike ask the context for them) is gloo's own, wrapped in one
// that is registered while it lives; interrupt() closes the connections and makes every
// wait on a registered buffer, now or later, throw.
//
// gloo's network thread never calls into what this hands out: it keeps using gloo's
// buffers, which the wrappers own. The wrappers only run on the threads that wait (the
// group's worker, the transfer waiters), which expect exceptions.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <set>

#include <gloo/transport/context.h>
#include <gloo/transport/unbound_buffer.h>

namespace distcomm {
namespace gloo {

class InterruptibleBuffer;

class InterruptibleContext final : public ::gloo::transport::Context {
 public:
  // tcp: gloo's TCP context of the group, its pairs created and connected through it.
  explicit InterruptibleContext(std::shared_ptr<::gloo::transport::Context> tcp);
  ~InterruptibleContext() override;

  std::unique_ptr<::gloo::transport::Pair>& createPair(int rank) override { return tcp_->createPair(rank); }
  std::unique_ptr<::gloo::transport::Pair>& getPair(int rank) override { return tcp_->getPair(rank); }
  // gloo's buffer, registered while it lives (a wait on it throws once interrupted).
  std::unique_ptr<::gloo::transport::UnboundBuffer> createUnboundBuffer(void* ptr, size_t size) override;

  // gloo's own buffer, not registered: for waits that must outlive an interrupt or cause one.
  std::unique_ptr<::gloo::transport::UnboundBuffer> create_unregistered_buffer(void* ptr, size_t size);
  // The timeout of waits given none (gloo's buffers read the TCP context's).
  void set_timeout(std::chrono::milliseconds timeout);

  // Closes every connection of the group (the peers see them end) and makes every wait on a
  // registered buffer, now or later, throw `why`. Idempotent; never waits on a peer.
  void interrupt(std::exception_ptr why);
  bool interrupted() const;

 private:
  friend class InterruptibleBuffer;
  // Registered buffers are woken by interrupt() until they deregister (their destructor).
  // Returns the interruption so far, null if none.
  std::exception_ptr add(InterruptibleBuffer* buffer);
  void remove(InterruptibleBuffer* buffer);
  void close_connections();

  const std::shared_ptr<::gloo::transport::Context> tcp_;
  mutable std::mutex mu_;
  std::set<InterruptibleBuffer*> live_;
  std::exception_ptr interrupted_;
};

}  // namespace gloo
}  // namespace distcomm
