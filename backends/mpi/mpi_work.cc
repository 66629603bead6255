#include "backends/mpi/mpi_work.h"

#include "api/errors.h"
#include "backends/mpi/mpi_runtime.h"

namespace distcomm {
namespace mpi {

void MpiWork::wait(std::chrono::milliseconds timeout) {
  if (forked_since_issue(*this)) return Work::wait(timeout);  // before driving or blocking (work.h)
  if (!is_completed() && Runtime::in_round()) {
    // A Work callback runs inside a round: the op it would wait for cannot move meanwhile.
    throw Error(description() + ": Work::wait called from a Work callback (on_finish) would wait "
                "for an op that cannot move before the callback returns; chain the next step with on_finish instead");
  }
  if (!is_completed() && waiter_drives_) {
    const auto deadline = is_use_default(timeout)
                              ? Runtime::Clock::time_point::max()
                              : Runtime::Clock::now() + timeout;
    // Where this thread may not call MPI, Work::wait below blocks until the MPI thread is
    // done, as it does for large ops.
    if (runtime_.drive([this] { return is_completed(); }, deadline) && !is_completed()) {
      throw Timeout((description().empty() ? std::string(op_type_name(op())) : description()) +
                    ": not finished after " + std::to_string(timeout.count()) +
                    " ms of waiting (Work::wait timeout); the op is still running");
    }
  }
  Work::wait(timeout);  // rethrows the op's error
}

}  // namespace mpi
}  // namespace distcomm
