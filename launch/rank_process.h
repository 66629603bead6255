// One rank as an operating-system process: how it is started (the attempt watches and
// stops it through local::LocalRanks, api/process/local_ranks.h).
//
// Each rank leads its own process group, so that stopping a rank also stops whatever it
// started (a shell script's children, a data loader), and the launcher can stop the whole
// job itself on Ctrl-C instead of relying on the terminal's signal reaching everyone.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace distcomm {
namespace launch {

struct RankProcess {
  int local_rank = -1;
  int rank = -1;
  pid_t pid = -1;       // the leader of its own process group
  int stdout_fd = -1;  // read ends of the rank's stdout and stderr pipes
  int stderr_fd = -1;
  std::string error_file;  // where it reports a failure (DISTCOMM_ERROR_FILE), "" if nowhere
  // Its id as a member of a fault-tolerant job (refused_member.h: member_id_of), set by the
  // attempt that starts it: how a refusal in the job's store is matched to this process.
  std::string member_id;
};

// The file execve will run: `program` itself when it holds a '/' (relative to working_dir
// when that is set), else the first match in $PATH. Throws std::invalid_argument saying
// where it looked when there is no such executable.
std::string find_program(const std::string& program, const std::string& working_dir);

// Forks and execs one rank: stdin from /dev/null (a rank outside the terminal's foreground
// group that read the terminal would be stopped), stdout and stderr into fresh pipes, its
// own process group, killed if the launcher dies. Throws std::runtime_error when the
// program cannot be executed, with the reason the kernel gave.
RankProcess start_rank(const std::string& path, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env, const std::string& working_dir,
                       int local_rank, int rank);

}  // namespace launch
}  // namespace distcomm
