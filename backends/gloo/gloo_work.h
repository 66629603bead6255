// GlooWork: the Work of a gloo collective. wait() without a timeout runs the op on the
// waiting thread when nobody has started it (gloo_worker.h); polling it or waiting with a
// timeout has the group's worker run it at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "api/work.h"

namespace distcomm {
namespace gloo {

class CollectiveWorker;

class GlooWork : public Work {
 public:
  GlooWork(OpType op, uint64_t seq, std::string description, std::weak_ptr<CollectiveWorker> worker,
           uint64_t ticket)
      : Work(op, seq, std::move(description)), worker_(std::move(worker)), ticket_(ticket) {}

  void wait(std::chrono::milliseconds timeout = kUseDefault) override;
  bool is_completed() const override;

 private:
  // Weak: a Work may outlive its group; by then it is finished and needs no worker.
  const std::weak_ptr<CollectiveWorker> worker_;
  const uint64_t ticket_;
};

}  // namespace gloo
}  // namespace distcomm
