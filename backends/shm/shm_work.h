// The Work of an shm op: waiting on it drives the group's engine, so the waiting thread
// runs the op itself (no hand-off to another thread and back).
#pragma once

#include <memory>

#include "api/plugin/backend.h"
#include "api/work.h"
#include "backends/shm/shm_engine.h"

namespace distcomm {
namespace shm {

class ShmWork final : public Work {
 public:
  ShmWork(OpType op, const OpContext& ctx, std::shared_ptr<Engine> engine)
      : Work(op, ctx.seq, ctx.description), engine_(std::move(engine)) {}

  void wait(std::chrono::milliseconds timeout = kUseDefault) override;

  // Where the op of a collective is made, when it fits (make_collective): its task holds
  // this Work, and destroys the op first (CollectiveTask).
  OpSpace* op_space() { return &op_space_; }

 private:
  OpSpace op_space_;
  // Keeps the group's memory mapped while this Work can still be waited on.
  const std::shared_ptr<Engine> engine_;
};

}  // namespace shm
}  // namespace distcomm
