// MpiWork: a Work whose wait() runs the MPI progress itself (see mpi_runtime.h), so that
// the waiting thread, not a thread hand-off, sees the op end.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "api/work.h"

namespace distcomm {
namespace mpi {

class Runtime;

class MpiWork : public Work {
 public:
  MpiWork(OpType op, uint64_t seq, std::string description, Runtime& runtime)
      : Work(op, seq, std::move(description)), runtime_(runtime) {}

  void wait(std::chrono::milliseconds timeout = kUseDefault) override;
  // Without the Work's lock: a waiter polls it between MPI tests.
  bool is_completed() const override { return done_.load(std::memory_order_acquire); }

  // The op's queue calls this once finish() has returned (every MpiWork ends that way).
  void mark_done() { done_.store(true, std::memory_order_release); }
  // Whether wait() runs MPI's progress itself (small ops) or blocks while the MPI thread
  // does (large ones); see Runtime::waiter_drives. Set before the Work is handed out.
  void set_waiter_drives(bool drives) { waiter_drives_ = drives; }
  bool waiter_drives() const { return waiter_drives_; }

 private:
  Runtime& runtime_;
  std::atomic<bool> done_{false};
  bool waiter_drives_ = true;
};

}  // namespace mpi
}  // namespace distcomm
