// The communicators one op runs on together, as one WatchedComm: batch_isend_irecv runs on
// the pair communicators of its peers (the same ones send and recv use, so that the two
// meet), grouped in one NCCL call. No CUDA here: tested with CPU stand-ins.
//
// The pairs are kept in the order of (lower rank, higher rank), which all ranks share;
// for one rank that is its peers in ascending order. Set up in that order, one after the
// other, the pair communicators of any set of batches never wait in a circle (the rank of
// the smallest pair still to set up is always at it), where the batch's own order (send
// to the next rank first, then receive from the previous one) would, around a ring.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/nccl/concurrent_abort.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

// The distinct peers of a batch, in the order their pair communicators are set up.
inline std::vector<int> pair_setup_order(std::vector<int> peers) {
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

// Comm: a WatchedComm with lock_issue() (as NcclComm).
template <typename Comm>
class CommSet : public WatchedComm {
 public:
  using IssueLocks = std::vector<decltype(std::declval<Comm&>().lock_issue())>;

  // members: in pair_setup_order, never empty. abort_bound: as Watchdog's.
  CommSet(std::vector<std::shared_ptr<Comm>> members, std::chrono::milliseconds abort_bound)
      : members_(std::move(members)), abort_bound_(abort_bound) {}

  const std::vector<std::shared_ptr<Comm>>& members() const { return members_; }

  // Every member's issue lock, taken in the members' order (as every CommSet does, so
  // two threads' batches cannot hold each other's).
  IssueLocks lock_issue() {
    IssueLocks locks;
    for (auto& m : members_) locks.push_back(m->lock_issue());
    return locks;
  }

  // The first member's error.
  std::exception_ptr async_error() override {
    for (auto& m : members_) {
      if (std::exception_ptr e = m->async_error()) return e;
    }
    return nullptr;
  }
  // Every member, concurrently (one's abort may wait for another's).
  void abort(const std::string& reason) override { abort_concurrently(members_, reason, abort_bound_); }
  // The first aborted member's reason: an op of the set that ended because of any abort
  // is no success.
  std::string abort_reason() const override {
    for (auto& m : members_) {
      std::string r = m->abort_reason();
      if (!r.empty()) return r;
    }
    return "";
  }
  std::string label() const override {
    std::string text;
    for (auto& m : members_) text += (text.empty() ? "" : " and ") + m->label();
    return text;
  }

 private:
  const std::vector<std::shared_ptr<Comm>> members_;
  const std::chrono::milliseconds abort_bound_;
};

}  // namespace nccl
}  // namespace distcomm
