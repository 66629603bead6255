#include "backends/shm/shm_wait.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace distcomm {
namespace shm {
namespace {

// Not FUTEX_PRIVATE: the words live in memory shared between processes.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  const auto ns = timeout.count() > 0 ? timeout.count() : 1;
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Pauses per idle() while spinning: about a microsecond, between two polls (each of which
// reads the clock).
constexpr uint32_t kSpinsPerIdle = 32;

}  // namespace

void wake_all(std::atomic<uint32_t>& word) {
  word.fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool publish(std::atomic<uint32_t>& word, const std::atomic<uint32_t>& sleepers) {
  // seq_cst on both sides (here and in Backoff::idle) orders "bump, then look for sleepers"
  // against "become a sleeper, then compare the word": one of the two sees the other.
  word.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) == 0) return false;
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  return true;
}

void Backoff::idle(const Blocker& blocker, Clock::time_point now, std::chrono::nanoseconds max_sleep) {
  if (!idle_since_valid_) {
    idle_since_ = now;
    idle_since_valid_ = true;
    sleeping_ = false;
  }
  const bool same_core = blocker.peer_cpu && blocker.peer_cpu->load(std::memory_order_relaxed) == ::sched_getcpu();
  const auto idle_for = now - idle_since_;
  if (idle_for < policy_.spin && !same_core) {
    // Watch the one word the awaited post changes, not the whole engine: the news is seen
    // within a cache-line transfer, and the caller polls only when there is some.
    auto changed = [&blocker] {
      if (blocker.bell && blocker.bell->load(std::memory_order_relaxed) != blocker.bell_seen) return true;
      if (blocker.spin_word) return blocker.spin_word->load(std::memory_order_relaxed) != blocker.spin_seen;
      return blocker.word && blocker.word->load(std::memory_order_relaxed) != blocker.seen;
    };
    for (uint32_t i = 0; i < kSpinsPerIdle; ++i) {
      if (changed()) return;
      cpu_relax();
    }
    return;
  }
  if (idle_for < policy_.spin + policy_.yield || blocker.word == nullptr) {
    ::sched_yield();
    return;
  }
  sleeping_ = true;
  if (blocker.bell) return sleep_on_bell(blocker, max_sleep);
  blocker.sleepers->fetch_add(1, std::memory_order_seq_cst);
  futex_wait(blocker.word, blocker.seen, max_sleep);
  blocker.sleepers->fetch_sub(1, std::memory_order_seq_cst);
}

void Backoff::sleep_on_bell(const Blocker& b, std::chrono::nanoseconds max_sleep) {
  // The peer's post bumps `word`, then (seeing a sleeper) rings the doorbell of every rank
  // whose round_of names it. Registering first and comparing `word` after (seq_cst both
  // sides) means: either this look sees the post, or the post sees this sleeper and rings
  // the bell, which the futex then finds changed.
  b.bell_round_of->store(b.peer + 1, std::memory_order_relaxed);
  b.sleepers->fetch_add(1, std::memory_order_seq_cst);
  b.bell_sleepers->fetch_add(1, std::memory_order_seq_cst);
  if (b.word->load(std::memory_order_seq_cst) == b.seen) futex_wait(b.bell, b.bell_seen, max_sleep);
  b.bell_sleepers->fetch_sub(1, std::memory_order_seq_cst);
  b.sleepers->fetch_sub(1, std::memory_order_seq_cst);
  // round_of stays: another thread of this rank may sleep on the bell still, and a stale
  // value costs at most a spurious ring.
}

}  // namespace shm
}  // namespace distcomm
