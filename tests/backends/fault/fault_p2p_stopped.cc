// A point-to-point ring (batch_isend_irecv: every rank sends to rank + 1 and receives from
// rank - 1) whose rank 1 is stopped (SIGSTOP: a debugger, a frozen node) in the middle. Every
// survivor's error must name rank 1 as the rank that did not report, never an innocent
// neighbour. The rank that times out first is two hops from rank 1 (its op has a shorter
// timeout): it waits on rank 2, which has no transfer with it pending but waits on rank 1,
// and the watch must follow those waits ("rank 2 has no transfer with this rank pending; it
// waits on rank 1, which did not report: its process ... is stopped (SIGSTOP ..."). Before
// 242970e it named rank 2 alone, and every other rank adopted that (a gloo ring of 16: no
// survivor named the stopped rank in 3 runs of 4). Once every survivor has its error, rank 0
// resumes rank 1 (SIGCONT), whose next op fails with the group's failure.
//
// At 4 ranks and up, the first to time out (rank 3) touches no transfer with rank 1 at all:
// only the followed waits can name it. At 3 ranks the first to time out (rank 0) also sends
// to rank 1, and may name it through that send: a weaker check, still run.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

constexpr int kStopped = 1;
// The iteration at which rank 1 stops, before issuing its ops: the ranks after it in the
// ring run ahead of it by one iteration a hop, until each waits on its predecessor.
constexpr int kStopAt = 5;
// The first to time out: its op's timeout, against the group's (kGroupTimeout) for the rest.
constexpr milliseconds kFirstTimeout{1500};
constexpr int64_t kElements = 4096;  // int32: 16 KiB a transfer

// The ring's ops, iteration after iteration, until one fails; its error, or "" if the loop
// ran out without one (rank 1 stopping is the case's; the others never finish 1000).
std::string run_ring(ProcessGroup& pg, int first, bool stop_here, Store& board) {
  const int rank = pg.rank();
  const int size = pg.size();
  for (int it = 0; it < 1000; ++it) {
    if (stop_here && it == kStopAt) {
      board.set("stopped_pid", to_bytes(std::to_string(::getpid())));
      ::raise(SIGSTOP);  // rank 0 resumes it once every survivor has its error
    }
    Tensor out = Tensor::zeros({kElements}, DType::kInt32);
    Tensor in = Tensor::zeros({kElements}, DType::kInt32);
    out.fill(rank);
    std::vector<P2POp> ops{P2POp::send(out, (rank + 1) % size), P2POp::recv(in, (rank + size - 1) % size)};
    P2POptions o;
    if (rank == first) o.timeout = kFirstTimeout;
    try {
      pg.batch_isend_irecv(ops, o)->wait();
    } catch (const Error& e) {
      return e.what();
    }
  }
  return "";
}

TEST_P(FaultSuite, StoppedRankInAP2pRingIsNamedByEverySurvivor) {
  // Ranks on another (simulated) host than rank 1 cannot look at its process (hier).
  const std::string why = differs("a stopped rank is named by its pid");
  runner().run([&why](Rank& r) {
    ProcessGroupPtr pg = r.join();
    const int size = pg->size();
    ASSERT_GE(size, 3) << "a ring with a rank between the first to time out and the stopped one";
    const int first = (kStopped + 2) % size;
    pg->barrier()->wait();
    // The watch publishes where each process runs in its first look, right after the group's
    // creation: a process stopped before that is named with the guesses, not by its state.
    std::this_thread::sleep_for(milliseconds(500));
    const auto start = Clock::now();
    const std::string msg = run_ring(*pg, first, r.rank() == kStopped, r.board());
    if (r.rank() == kStopped) {
      // Resumed: its op failed with the group's failure (or, at worst, its own timeout).
      EXPECT_FALSE(msg.empty()) << "rank 1's ring ran on after the others failed";
      mark_done(r.board(), r.rank());
      r.leave(pg);
      return;
    }
    const double took = seconds_since(start);
    std::fprintf(stderr, "rank %d failed after %.2f s: %s\n", r.rank(), took, msg.c_str());
    // Within the first's timeout, its explanation (one look at every rank, up to a second
    // for rank 1's answer) and the others' adoption: well within the suite's bound.
    EXPECT_LE(took, kWithin) << "rank " << r.rank();
    const std::string who = "rank " + std::to_string(r.rank());
    // Named directly ("rank 1 did not report: ...") or at the end of the waits ("it waits on
    // rank 2, which waits on rank 1, which did not report: ...").
    const std::string named = "rank " + std::to_string(kStopped) + " did not report";
    const std::string reached = "rank " + std::to_string(kStopped) + ", which did not report";
    EXPECT_TRUE(msg.find(named) != std::string::npos || msg.find(reached) != std::string::npos)
        << who << "'s error does not name rank " << kStopped << " as the rank that did not report: " << msg;
    // What it is: its process's state (gloo, shm, auto and mpi: one host, every rank sees it).
    // Nor another rank as the one that did not report (the old words named no rank so, and
    // ended at the innocent peer: "rank 2 has no transfer with this rank pending").
    expect_stopped_rank_alone_silent(msg, kStopped, why.empty() ? to_string(r.board().get("stopped_pid")) : "", who);
    mark_done(r.board(), r.rank());
    if (r.rank() == 0) {
      wait_for_done(r.board(), ranks_but(size, kStopped));
      ::kill(std::stoi(to_string(r.board().get("stopped_pid"))), SIGCONT);
      // Rank 0's process serves the group's store (forked runners): rank 1 ends first.
      wait_for_done(r.board(), {kStopped});
    }
    r.leave(pg);
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
