#include "tests/testing/failure_checks.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "api/store/file_store.h"

namespace distcomm {
namespace testing {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool process_ends_within(int pid, std::chrono::milliseconds limit) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, static_cast<int>(limit.count()));
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  return n == 1;
}

namespace {

StorePtr done_board(ProcessGroup& pg) {
  if (pg.store()) return pg.store();
  const char* dir = std::getenv("TEST_TMPDIR");
  static StorePtr board = std::make_shared<FileStore>(std::string(dir ? dir : "/tmp") + "/failure_checks_done");
  return board;
}

}  // namespace

void mark_done(ProcessGroup& pg) { mark_done(*done_board(pg), pg.rank()); }

void wait_for_done(ProcessGroup& pg, const std::vector<int>& ranks) { wait_for_done(*done_board(pg), ranks); }

void mark_done(Store& board, int rank) { board.set("test/done/" + std::to_string(rank), "1"); }

void wait_for_done(Store& board, const std::vector<int>& ranks) {
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back("test/done/" + std::to_string(r));
  board.wait(keys, std::chrono::milliseconds(60000));
}

}  // namespace testing
}  // namespace distcomm
