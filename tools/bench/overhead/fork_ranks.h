// Starts a job's ranks as child processes of this one, for the measuring programs.
#pragma once

#include <functional>
#include <string>

namespace distcomm {
namespace bench {

// Forks nproc children; child r runs fn(r) and exits 0, or prints "<name> rank r: <what it
// threw>" to stderr and exits 1. The parent blocks in waitpid (it never wakes while the
// job runs, so it takes nothing from the ranks), and kills the rest once one rank fails.
// Returns true when every rank exited 0.
bool fork_ranks(int nproc, const std::string& name, const std::function<void(int rank)>& fn);

}  // namespace bench
}  // namespace distcomm
