// Starts a job's ranks as child processes of this one, for the measuring programs.
#pragma once

#include <functional>
#include <string>

namespace distcomm {
namespace bench {

// Forks nproc children (api/process/local_ranks.h); child r runs fn(r). The parent sleeps until
// a rank exits (it takes nothing from the ranks while the job runs); a rank that throws or
// exits non-zero is named on stderr ("<name> rank r: it threw ..."), and the others are
// killed. Returns true when every rank exited 0.
bool fork_ranks(int nproc, const std::string& name, const std::function<void(int rank)>& fn);

}  // namespace bench
}  // namespace distcomm
