#include "api/process/fork_generation.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

namespace distcomm {
namespace {

std::atomic<uint64_t> g_generation{0};

// In the child, before fork() returns there: async-signal-safe (a lock-free increment).
void one_more_generation() { g_generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

void count_forks() {
  static std::once_flag installed;
  std::call_once(installed, [] { ::pthread_atfork(nullptr, nullptr, one_more_generation); });
}

uint64_t fork_generation() { return g_generation.load(std::memory_order_relaxed); }

}  // namespace distcomm
