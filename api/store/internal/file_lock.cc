#include "api/store/internal/file_lock.h"

#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <thread>

namespace distcomm {
namespace internal {

namespace {
uint64_t jitter() {
  // Per thread, seeded apart by the thread and the process (xorshift: quality is not needed).
  thread_local uint64_t state =
      std::hash<std::thread::id>()(std::this_thread::get_id()) ^ (static_cast<uint64_t>(::getpid()) << 32) ^ 0x9e3779b97f4a7c15ULL;
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}
}  // namespace

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
    // Jittered, so that ranks that started polling together do not keep trying together.
    const auto jittered = pause + microseconds(jitter() % (pause.count() / 2 + 1));
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(jittered, left));
    pause = std::min(pause * 2, kMaxPause);
  }
}

}  // namespace internal
}  // namespace distcomm
