#include "backends/gloo/gloo_comm.h"

#include <signal.h>

#include "api/diagnostics/op_fingerprint.h"
#include "backends/gloo/gloo_shared_device.h"

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

GlooComm::GlooComm(const BackendOptions& options, const GlooConfig& config) {
  ignore_sigpipe_unless_handled();
  // One deadline for the creation's name lookups and its rendezvous: a DNS server that does
  // not answer must not hold the creation past it.
  InitWait wait =
      InitWait::for_backend(options.config, options.timeout, "", options.global_ranks, options.store.get());
  device_ = shared_tcp_device(config, &listening_on_, wait.deadline, options.timeout);
  context_ = std::make_shared<GlooContext>(options.rank, options.size);
  // Pairs take this timeout when they connect; it is also the default of every op.
  context_->setTimeout(options.timeout);
  if (options.size == 1) return;  // nobody to connect to
  wait.where = group_rank_text(options.rank, options.size, options.group_name, options.global_ranks) +
               " (gloo, listening on " + listening_on_ + ")";
  std::vector<int> same_host_pids;
  context_->adopt_connections(
      device_, connect_full_mesh(*context_, device_, *options.store, wait, &same_host_pids));
  connections_ = std::make_unique<ConnectionWatch>(*context_->transport(), same_host_pids);
}

GlooComm::~GlooComm() {
  if (connections_) connections_->stop();
}

void GlooComm::interrupt(std::exception_ptr why) {
  if (InterruptibleContext* transport = context_->transport()) transport->interrupt(std::move(why));
}

}  // namespace gloo
}  // namespace distcomm
