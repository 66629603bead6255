// flock() with a deadline.
//
// A blocking flock() waits for as long as another process holds the lock: a rank stopped
// (SIGSTOP, a debugger, a frozen cgroup) while it holds a FileStore's lock, or a host lost
// while it holds an NFS lock, would hold every other rank's store call, a shrink that
// exists to leave that rank behind included, for good. So the lock is tried without
// blocking, again and again with growing pauses, until the caller's deadline.
#pragma once

#include <chrono>

namespace distcomm {
namespace internal {

enum class FileLockResult { kLocked, kTimedOut, kFailed };

// Takes flock(fd, LOCK_EX or LOCK_SH) by the deadline. kFailed leaves errno set.
FileLockResult flock_until(int fd, bool exclusive, std::chrono::steady_clock::time_point deadline);

}  // namespace internal
}  // namespace distcomm
