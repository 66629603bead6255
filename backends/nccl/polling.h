// Waiting on NCCL and CUDA by polling, without a floor on latency and without a deadline
// that can be missed.
//
// Nonblocking NCCL answers ncclInProgress for every op while a helper thread issues it
// (tens of microseconds), and an end event passes whenever the GPU gets there. A sleep
// before the first re-check would add its own length to every op, so a wait spins first,
// then yields the CPU, and only then sleeps, doubling up to a cap: fast ops cost no sleep,
// long waits cost little CPU.
#pragma once

#include <atomic>
#include <chrono>

namespace distcomm {
namespace nccl {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  // Spin (re-check at once) for this long, then yield until kYieldUntil, then sleep.
  static constexpr std::chrono::microseconds kSpinFor{20};
  static constexpr std::chrono::microseconds kYieldUntil{200};
  static constexpr std::chrono::microseconds kFirstSleep{10};

  struct Step {
    enum Kind { kSpin, kYield, kSleep } kind;
    std::chrono::microseconds sleep{0};  // kSleep only
  };

  explicit Backoff(std::chrono::microseconds max_sleep = std::chrono::microseconds(1000))
      : max_sleep_(max_sleep) {}

  // The step to take before the next check, `waited` after the wait began. Sleeps double
  // from kFirstSleep to the cap.
  Step next(std::chrono::nanoseconds waited);
  // next(time since construction), carried out.
  void pause();

 private:
  const std::chrono::microseconds max_sleep_;
  const Clock::time_point start_ = Clock::now();
  std::chrono::microseconds sleep_{0};
};

enum class Waited { kDone, kTimedOut, kAborted };

// Calls done() until it returns true (kDone), the deadline passes (kTimedOut) or *aborted
// becomes true (kAborted), checked in that order before every pause. done() is called at
// least once, even past the deadline.
template <typename Done>
Waited poll_until(Done&& done, Backoff::Clock::time_point deadline, const std::atomic<bool>* aborted = nullptr,
                  std::chrono::microseconds max_sleep = std::chrono::microseconds(1000)) {
  Backoff backoff(max_sleep);
  for (;;) {
    if (done()) return Waited::kDone;
    if (Backoff::Clock::now() >= deadline) return Waited::kTimedOut;
    if (aborted && aborted->load()) return Waited::kAborted;
    backoff.pause();
  }
}

// now + timeout, or no deadline at all for a timeout of zero or less (an OpContext with
// no timeout, as direct users of a backend may pass).
Backoff::Clock::time_point deadline_after(std::chrono::milliseconds timeout);

}  // namespace nccl
}  // namespace distcomm
