// How the examples start their own ranks, so that one command runs a whole job:
//
//   bazel run //examples:all_reduce -- --nproc=3
//
// Started by hand (no rank in the environment), an example re-runs its own binary --nproc
// times through the launcher library (launch/), each copy with RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT... set, and exits with the job's status. Started by a launcher
// (tools/launch, torchrun-style variables, mpirun or srun), it simply is one rank:
//
//   int main(int argc, char** argv) {
//     distcomm::InitOptions init = distcomm::examples::self_launch(argc, argv, /*default_nproc=*/3);
//     distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);  // only ranks get here
//     ...
#pragma once

#include <string>

#include <distcomm/api/init.h>

namespace distcomm {
namespace examples {

// Parses the command line (gflags: the example's own flags plus --nproc and --backend, which
// this library defines). Run by hand, it starts --nproc copies of this program and exits
// with their status without returning. In a rank it returns the options for
// init_process_group (the backend from --backend; otherwise $DISTCOMM_BACKEND, else auto).
InitOptions self_launch(int argc, char** argv, int default_nproc);

// With --help (or -h) among the flags: prints the example's own flags (not gflags'
// internals) and exits 0. self_launch calls it; an example that parses its flags itself
// calls it first.
void print_help_if_asked(int argc, char** argv);

// Runs nproc copies of this program with the same arguments as one job on this machine and
// returns what main should return: 0 when every rank exited 0. The ranks' output passes
// through unchanged (no "[rank R]" prefix), whole lines at a time. backend, when not empty,
// is exported as DISTCOMM_BACKEND. If a rank fails, the others are stopped and the failure
// is reported on stderr; Ctrl-C stops them all.
int launch_copies_of_self(int argc, char** argv, int nproc, const std::string& backend);

// What a job that goes on without a dead rank (ft/manager.h) needs of its launcher: the
// store served by the launcher (it must outlive every rank), the others left running when
// one fails, and a replacement for each failed rank after replace_after_s (< 0: none); as
// tools/launch --on_failure=continue --replace_after_s.
struct FaultTolerantLaunch {
  double replace_after_s = -1;
};
int launch_copies_of_self(int argc, char** argv, int nproc, const std::string& backend,
                          const FaultTolerantLaunch& fault_tolerant);

}  // namespace examples
}  // namespace distcomm
