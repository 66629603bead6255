// The alarm clock of a group's worker thread: a timerfd the worker sleeps on, which others
// set for a time (an op's grace running out) or for now. Setting and clearing it is a
// system call and wakes nobody, which is what lets a caller take an op itself without the
// worker ever waking for it.
#pragma once

#include <chrono>

namespace distcomm {
namespace gloo {

class WakeTimer {
 public:
  using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC, as the timerfd's
  // Throws Error when the kernel gives no timerfd.
  WakeTimer();
  ~WakeTimer();
  WakeTimer(const WakeTimer&) = delete;
  WakeTimer& operator=(const WakeTimer&) = delete;

  void ring_at(Clock::time_point when);
  void ring_now();
  void clear();
  // Blocks until the timer rings (at once if it has rung since the last wait).
  void wait();

 private:
  void set(long long seconds, long nanoseconds);
  int fd_ = -1;
};

}  // namespace gloo
}  // namespace distcomm
