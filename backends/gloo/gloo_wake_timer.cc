#include "backends/gloo/gloo_wake_timer.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "api/errors.h"

namespace distcomm {
namespace gloo {

WakeTimer::WakeTimer() : fd_(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)) {
  if (fd_ < 0) throw Error(std::string("gloo: cannot create the worker's timer (timerfd_create): ") + std::strerror(errno));
}

WakeTimer::~WakeTimer() { ::close(fd_); }

void WakeTimer::set(long long seconds, long nanoseconds) {
  itimerspec spec{};
  spec.it_value.tv_sec = static_cast<time_t>(seconds);
  spec.it_value.tv_nsec = nanoseconds;
  // Absolute: a time already past rings at once. It cannot fail with a valid fd and value.
  ::timerfd_settime(fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

void WakeTimer::ring_at(Clock::time_point when) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  set(ns / 1000000000, static_cast<long>(ns % 1000000000));
}

void WakeTimer::ring_now() { set(0, 1); }  // the earliest absolute time: long past

void WakeTimer::clear() {
  itimerspec off{};
  ::timerfd_settime(fd_, 0, &off, nullptr);
}

void WakeTimer::wait() {
  uint64_t expirations = 0;
  // EINTR: return, the caller looks at its state and waits again if there is nothing to do.
  (void)!::read(fd_, &expirations, sizeof(expirations));
}

}  // namespace gloo
}  // namespace distcomm
