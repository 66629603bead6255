// A program that makes a group in main and another in an atexit handler (a library's
// clean-up that reports a last result, say). exit() destroys the main thread's thread_local
// objects before it runs the atexit handlers, and shm's op path wrote into its freed list of
// completions: "free(): invalid pointer", SIGABRT, as the handler's group ended (5 of 5 runs
// of an outside user's program). The write itself does not always crash, so the ranks run
// under valgrind, which reports it every time (its exit code 9).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/test_files.h"

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(ShmGroupAtExit, AGroupMadeAgainInAnAtexitHandlerRunsAndEndsCleanly) {
  if (std::system("valgrind --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "valgrind is not installed (tools/setup.sh installs it)";
  }
  const std::string dir = distcomm::testing::temp_path("at_exit");
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const std::string rank_program = distcomm::testing::runfile("tests/backends/shm/group_at_exit_rank");
  pid_t children[2];
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    std::vector<const char*> argv = {"valgrind", "-q", "--error-exitcode=9", rank_program.c_str(), r.c_str(),
                                     dir.c_str(), nullptr};
    children[rank] = ::fork();
    ASSERT_GE(children[rank], 0);
    if (children[rank] == 0) {
      ::execvp(argv[0], const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
  }
  for (int rank = 0; rank < 2; ++rank) {
    int status = 0;
    ASSERT_EQ(::waitpid(children[rank], &status, 0), children[rank]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << ": "
        << (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                : "exit " + std::to_string(WEXITSTATUS(status)) + " (9: valgrind found an error)");
    EXPECT_EQ(read(dir + "/main_" + std::to_string(rank)), "3");
    EXPECT_EQ(read(dir + "/at_exit_" + std::to_string(rank)), "3");
  }
}

}  // namespace
