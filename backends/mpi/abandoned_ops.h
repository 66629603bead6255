// Ops given up -- timed out, failed, or cut off when their group failed or was destroyed --
// whose requests MPI still holds, and the communicators they run on.
//
// A given-up op's buffers must stay alive until MPI lets go of its requests, so the op is
// kept here and tested now and then. Its communicator must stay alive too: Open MPI 4.1
// tears down a communicator's matching state at MPI_Comm_free even while a nonblocking
// collective (libnbc) on it is pending, and when the peers later issue that collective the
// pending schedule's next round posts a receive on the freed communicator: SIGSEGV inside
// MPI_Test, on whichever thread drives MPI, ending the whole job. So a destroyed group's
// communicator is freed once none of its requests is pending: at once when none is, later
// when the peers' ops complete them, never when they never do (MPI_Finalize takes it then).
// Keeping it also keeps its context id in use on this rank, so no later communicator can
// inherit its stray messages.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/mpi/mpi_op.h"

namespace distcomm {
namespace mpi {

// How a job gets the store that names a peer MPI cannot (a collective's, a recv from any
// rank's), for the Timeout and the exit line: one place, so that both give the same advice.
// Under mpirun the mpi backend gets a store only from InitOptions::store or an init_method
// other than the default env:// (api/init.cc): MASTER_ADDR and MASTER_PORT alone give none,
// so they are not the advice (docs/failures.md).
inline constexpr char kStoreAdvice[] =
    "give the job a store (an init_method such as tcp://HOST:PORT, which rank 0 serves, or "
    "file:///shared/path; or InitOptions::store): under mpirun, MASTER_ADDR and MASTER_PORT alone give none";

// Under the runtime's progress lock only.
class AbandonedOps {
 public:
  AbandonedOps() = default;
  AbandonedOps(const AbandonedOps&) = delete;
  AbandonedOps& operator=(const AbandonedOps&) = delete;

  // Keeps op (MPI holds some of its requests, on comm) until they end.
  void add(MPI_Comm comm, std::unique_ptr<Op> op);
  // comm's group is gone: frees it as soon as none of its ops is kept here (now, if none is).
  void retire(MPI_Comm comm);
  // Tests every kept op; drops those that ended and frees the retired communicators that
  // no kept op uses any more.
  void test();
  bool empty() const { return ops_.empty(); }
  // Whom the kept ops wait for, as MPI tells: "world rank 1 (a recv of tag 3)" per pending
  // send or recv with a known peer; for a collective or a recv from any rank MPI cannot
  // tell, and the text says so (only a store names that peer: kStoreAdvice).
  std::string waited_for() const;
  // Whether a retired communicator still waits for its ops (it is then never freed by
  // this process if they never end).
  bool holds_retired() const { return !retired_.empty(); }

 private:
  bool in_use(MPI_Comm comm) const;

  struct Kept {
    MPI_Comm comm;
    std::unique_ptr<Op> op;
  };
  std::vector<Kept> ops_;
  std::vector<MPI_Comm> retired_;
};

}  // namespace mpi
}  // namespace distcomm
