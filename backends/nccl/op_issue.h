// How the nccl backend issues one op, in an order that keeps the ranks in step. No CUDA
// here: the steps are the backend's (nccl_backend.cc), and their order is tested with CPU
// stand-ins (tests/backends/nccl/op_issue_test.cc).
//
//   1. check(): everything about the op's arguments that needs no communicator -- its
//      device, the caller's stream (on that device, not being captured into a graph).
//      InvalidArgument: nothing was sent and nothing was counted, so the group goes on;
//   2. comm(): the op's communicator, found or made. A group communicator made here takes
//      its group's next number, which names the store key its ranks meet at: every rank
//      must count alike, so an op its checks refuse must never get this far;
//   3. work(comm): the op's Work;
//   4. issue(comm, work): set the communicator up if it is new, enqueue the op, record its
//      end marker -- all under the communicator's issue lock, so that no other thread's op
//      comes between an op and its marker (the marker would then pass only after that op
//      too: the first op's wait() would wait for the second, and a stuck second op would
//      be blamed on the first). A failure here leaves this rank out of step with the
//      others: the Work ends with it and the group fails (Watchdog::fail);
//   5. the watchdog follows the op.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include "api/diagnostics/group_failure.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {

// Comm: a WatchedComm whose lock_issue() holds the lock that orders its setup and its ops
// until what it returns goes (the communicator's own calls take it too: it is recursive).
// W: a Work and TrackedOp.
template <typename Comm, typename W>
struct OpIssue {
  GroupFailure* failure = nullptr;
  Watchdog* watchdog = nullptr;
  std::chrono::milliseconds timeout{0};  // the op's, for the watchdog
  std::function<void()> check;
  std::function<std::shared_ptr<Comm>()> comm;
  std::function<std::shared_ptr<W>(const std::shared_ptr<Comm>&)> work;
  std::function<void(Comm&, W&)> issue;
};

template <typename Comm, typename W>
std::shared_ptr<W> issue_op(const OpIssue<Comm, W>& s) {
  s.failure->check_usable();
  s.check();
  const std::shared_ptr<Comm> comm = s.comm();
  const std::shared_ptr<W> work = s.work(comm);
  try {
    const auto issuing = comm->lock_issue();
    s.issue(*comm, *work);
  } catch (...) {
    work->complete(s.watchdog->fail(std::current_exception(), comm, *work));
    return work;
  }
  s.watchdog->track(comm, work, s.timeout);
  return work;
}

}  // namespace nccl
}  // namespace distcomm
