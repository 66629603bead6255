#include "tools/bench/overhead/fork_ranks.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <vector>

namespace distcomm {
namespace bench {

bool fork_ranks(int nproc, const std::string& name, const std::function<void(int rank)>& fn) {
  std::fflush(nullptr);  // or each child would print the parent's buffered output again
  std::vector<pid_t> children;
  bool ok = true;
  for (int rank = 0; rank < nproc && ok; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed parent takes its ranks with it
      int status = 0;
      try {
        fn(rank);
      } catch (const std::exception& e) {
        fprintf(stderr, "%s rank %d: %s\n", name.c_str(), rank, e.what());
        status = 1;
      } catch (...) {
        fprintf(stderr, "%s rank %d: unknown exception\n", name.c_str(), rank);
        status = 1;
      }
      std::fflush(nullptr);
      ::_exit(status);
    }
    if (pid < 0) {
      perror("fork");
      ok = false;
    } else {
      children.push_back(pid);
    }
  }
  while (!children.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) return false;
    children.erase(std::remove(children.begin(), children.end(), pid), children.end());
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && ok) {
      ok = false;  // the others would wait for this rank until their timeout: stop them
      for (pid_t c : children) ::kill(c, SIGKILL);
    }
  }
  return ok;
}

}  // namespace bench
}  // namespace distcomm
