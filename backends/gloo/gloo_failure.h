// How a gloo group fails, and how its ranks learn why.
//
// gloo reports every transport problem as gloo::IoException. This class turns those into
// distcomm's errors (Timeout, PeerFailure), remembers the group's first failure so that
// later ops fail at once with it, and makes sure no other rank hangs on a broken group:
//   1. the first failure is published in the group's store ("rank 2 timed out in ..."),
//   2. every connection of this rank is then cut (interrupt), so peers blocked on this rank
//      fail within milliseconds instead of waiting for their own timeout,
//   3. a rank whose connection was cut reads the published reason, so it reports the real
//      cause (the other rank's Timeout) instead of a bare "connection closed".
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <string>

#include "api/store.h"

namespace distcomm {
namespace gloo_backend {

class GroupFailure {
 public:
  // interrupt: wakes everything blocked on the group's connections and closes them.
  GroupFailure(StorePtr store, int rank, std::function<void()> interrupt);

  bool failed() const { return failed_.load(std::memory_order_acquire); }

  // For an op issued after the group failed or was shut down: the first error's type, with a
  // message naming it. Never null once failed() or shut_down() has been called.
  std::exception_ptr refusal() const;

  // Turns what an op threw into distcomm's error and returns it. The first failure of the
  // group is recorded, published and followed by interrupt(); `what` names the op
  // ("rank 1/4 group 'world' all_reduce #12 ..."), `timeout` is the op's timeout.
  std::exception_ptr record(std::exception_ptr raw, const std::string& what, std::chrono::milliseconds timeout);

  // The group is being shut down by this rank: later ops are refused, and ops cut off by
  // the shutdown say so. ops_in_flight is asked after the group is marked; when it says
  // yes, the peers are told ("rank R shut the group down") and the connections are cut,
  // so that neither side waits for the other.
  void shut_down(const std::function<bool()>& ops_in_flight);

 private:
  enum class Kind { kTimeout, kPeer, kShutdown, kOther };
  struct Classified {
    Kind kind;
    std::exception_ptr error;
  };

  Classified classify(std::exception_ptr raw, std::chrono::milliseconds timeout) const;
  // A peer closed its connections: ask the store, for up to a second, whether it said why.
  Classified explain_peer_loss(const std::string& gloo_message) const;
  void publish(Kind kind, const std::string& message) const;

  const StorePtr store_;
  const int rank_;
  const std::function<void()> interrupt_;

  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  bool shut_down_ = false;
  Kind first_kind_ = Kind::kOther;
  std::string first_message_;  // with the op that failed first
};

}  // namespace gloo_backend
}  // namespace distcomm
