// std::timed_mutex's timed locks, in a form ThreadSanitizer can follow.
//
// libstdc++ implements try_lock_until / try_lock_for on the steady clock with
// pthread_mutex_clocklock (glibc 2.30 and later), which GCC 12's ThreadSanitizer does not
// intercept: it never sees the lock taken, reports its unlock as "unlock of an unlocked
// mutex", and then reports races on everything the lock guards. Every test whose process
// uses a FileStore or a TCPStore failed under --config=tsan for that alone. Under TSan these
// take the lock with try_lock (intercepted) every 50 us until the deadline; elsewhere they
// are the standard calls. The wait differs only in its granularity, never in its bound.
#pragma once

#include <chrono>
#include <mutex>
#include <thread>

#if defined(__SANITIZE_THREAD__)
#define DISTCOMM_TSAN_TIMED_LOCKS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DISTCOMM_TSAN_TIMED_LOCKS 1
#endif
#endif

namespace distcomm {

// m.try_lock_until(deadline).
template <typename Clock, typename Duration>
bool lock_until(std::timed_mutex& m, const std::chrono::time_point<Clock, Duration>& deadline) {
#ifdef DISTCOMM_TSAN_TIMED_LOCKS
  while (!m.try_lock()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
#else
  return m.try_lock_until(deadline);
#endif
}

// m.try_lock_for(wait).
template <typename Rep, typename Period>
bool lock_for(std::timed_mutex& m, const std::chrono::duration<Rep, Period>& wait) {
  return lock_until(m, std::chrono::steady_clock::now() + wait);
}

// A unique_lock that owns `m` when it could be locked by `deadline`, else owns nothing.
template <typename Clock, typename Duration>
std::unique_lock<std::timed_mutex> unique_lock_until(std::timed_mutex& m,
                                                     const std::chrono::time_point<Clock, Duration>& deadline) {
  if (!lock_until(m, deadline)) return std::unique_lock<std::timed_mutex>(m, std::defer_lock);
  return std::unique_lock<std::timed_mutex>(m, std::adopt_lock);
}

}  // namespace distcomm
