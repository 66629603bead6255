#include "api/store/internal/file_lock.h"

#include <sys/file.h>

#include <algorithm>
#include <cerrno>
#include <thread>

namespace distcomm {
namespace internal {

FileLockResult flock_until(int fd, bool exclusive, std::chrono::steady_clock::time_point deadline) {
  using std::chrono::microseconds;
  // Locks are held for microseconds (one record's append or replay), so the first tries
  // come quickly; a holder that stays is one that stopped, and then a 20 ms poll costs nothing.
  auto pause = microseconds(50);
  constexpr auto kMaxPause = microseconds(20000);
  while (true) {
    if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) return FileLockResult::kLocked;
    if (errno != EWOULDBLOCK && errno != EINTR) return FileLockResult::kFailed;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return FileLockResult::kTimedOut;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, left));
    pause = std::min(pause * 2, kMaxPause);
  }
}

}  // namespace internal
}  // namespace distcomm
