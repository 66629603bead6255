#include "backends/gloo/gloo_comm.h"

#include <signal.h>

#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "api/errors.h"
#include "backends/gloo/gloo_device.h"
#include "backends/gloo/gloo_slots.h"

namespace distcomm {
namespace gloo {
namespace {

// gloo writes to its sockets with writev(), which raises SIGPIPE when the peer has died;
// by default that kills the whole process instead of failing the op with PeerFailure.
// gloo handles EPIPE itself, so the signal is ignored, unless the program has installed
// its own handler (then it is the program's choice, and left alone).
void ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      !(current.sa_flags & SA_SIGINFO)) {
    ::signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

GlooComm::GlooComm(const BackendOptions& options) {
  ignore_sigpipe_unless_handled();
  device_ = create_tcp_device(options.config, &listening_on_);
  context_ = std::make_shared<GlooContext>(options.rank, options.size);
  // Pairs take this timeout when they connect; it is also the default of every op.
  context_->setTimeout(options.timeout);
  if (options.size == 1) return;  // nobody to connect to
  const std::string where = "rank " + std::to_string(options.rank) + "/" + std::to_string(options.size) +
                            " group '" + options.group_name + "' (gloo, listening on " + listening_on_ + ")";
  connect_full_mesh(*context_, device_, *options.store,
                    InitWait::for_backend(options.config, options.timeout, where, options.global_ranks,
                                          options.store.get()));
}

void GlooComm::interrupt() {
  // gloo has no call that fails the waits of a running collective from another thread.
  // It does one thing when a wait on an unbound buffer times out: it signals every pair of
  // the context ("Application timeout caused pair closure"), which fails all their pending
  // operations and closes their sockets. So: post a receive on a slot nobody ever sends to
  // and wait for it for one millisecond.
  const int size = context_->size;
  char unused = 0;
  for (int i = 1; i < size; ++i) {
    const int peer = (context_->rank + i) % size;
    auto buffer = context_->createUnboundBuffer(&unused, 1);
    try {
      buffer->recv(peer, ::gloo::Slot::build(kInterruptSlotPrefix, 0), 0, 1);
    } catch (const std::exception&) {
      continue;  // this pair is closed already; another one may still be open
    }
    try {
      buffer->waitRecv(nullptr, std::chrono::milliseconds(1));
    } catch (const std::exception&) {
      // The timeout that signalled every pair: done.
    }
    return;
  }
}

}  // namespace gloo
}  // namespace distcomm
