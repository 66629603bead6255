#include "api/store/internal/close_on_fork.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace distcomm {
namespace internal {
namespace {

constexpr int kSlots = 4096;
// fd + 1 per slot; 0 is a free slot (so that the zero-initialised table is empty).
std::atomic<int> registered[kSlots];

// In the child: only async-signal-safe calls.
void let_go_in_child() {
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  for (std::atomic<int>& slot : registered) {
    const int fd = slot.exchange(0, std::memory_order_relaxed) - 1;
    if (fd < 0) continue;
    if (null >= 0) {
      // Replaces the socket, keeping the number (the child's copy of the store may still
      // name it) and close-on-exec as the socket had it: a child that execs (system(), a
      // launcher's rank) must not carry /dev/null copies on those numbers.
      ::dup3(null, fd, O_CLOEXEC);
    } else {
      ::close(fd);
    }
  }
  if (null >= 0) ::close(null);
}

}  // namespace

void close_on_fork(int fd) {
  static std::once_flag installed;
  std::call_once(installed, [] { ::pthread_atfork(nullptr, nullptr, let_go_in_child); });
  if (fd < 0) return;
  for (std::atomic<int>& slot : registered) {
    int empty = 0;
    if (slot.compare_exchange_strong(empty, fd + 1, std::memory_order_relaxed)) return;
  }
}

void keep_on_fork(int fd) {
  if (fd < 0) return;
  for (std::atomic<int>& slot : registered) {
    int mine = fd + 1;
    if (slot.compare_exchange_strong(mine, 0, std::memory_order_relaxed)) return;
  }
}

}  // namespace internal
}  // namespace distcomm
