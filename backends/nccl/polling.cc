#include "backends/nccl/polling.h"

#include <algorithm>
#include <thread>

namespace distcomm {
namespace nccl {

constexpr std::chrono::microseconds Backoff::kSpinFor;
constexpr std::chrono::microseconds Backoff::kYieldUntil;
constexpr std::chrono::microseconds Backoff::kFirstSleep;

Backoff::Step Backoff::next(std::chrono::nanoseconds waited) {
  if (waited < kSpinFor) return {Step::kSpin};
  if (waited < kYieldUntil) return {Step::kYield};
  sleep_ = sleep_.count() == 0 ? std::min(kFirstSleep, max_sleep_) : std::min(sleep_ * 2, max_sleep_);
  return {Step::kSleep, sleep_};
}

void Backoff::pause() {
  const Step step = next(Clock::now() - start_);
  switch (step.kind) {
    case Step::kSpin:
      break;
    case Step::kYield:
      std::this_thread::yield();
      break;
    case Step::kSleep:
      std::this_thread::sleep_for(step.sleep);
      break;
  }
}

Backoff::Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  return timeout > std::chrono::milliseconds::zero() ? Backoff::Clock::now() + timeout
                                                     : Backoff::Clock::time_point::max();
}

}  // namespace nccl
}  // namespace distcomm
