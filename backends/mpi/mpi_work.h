// MpiWork: a Work whose wait() runs the MPI progress itself (see mpi_runtime.h), so that
// the waiting thread, not a thread hand-off, sees the op end.
#pragma once

#include <chrono>
#include <string>

#include "api/work.h"
#include "backends/mpi/mpi_runtime.h"

namespace distcomm {
namespace mpi {

class MpiWork : public Work {
 public:
  MpiWork(OpType op, uint64_t seq, std::string description, Runtime& runtime)
      : Work(op, seq, std::move(description)), runtime_(runtime) {}

  void wait(std::chrono::milliseconds timeout = kNoTimeout) override;

 private:
  Runtime& runtime_;
};

}  // namespace mpi
}  // namespace distcomm
