#include "api/store/internal/call_deadline.h"

#include <algorithm>
#include <utility>

#include "api/errors.h"

namespace distcomm {
namespace internal {
namespace {
thread_local StoreCallDeadline* t_innermost = nullptr;
}  // namespace

StoreCallDeadline::StoreCallDeadline(std::chrono::steady_clock::time_point deadline, std::string what)
    : deadline_(deadline), what_(std::move(what)), enclosing_(t_innermost) {
  // The sooner deadline holds, and its name with it.
  if (enclosing_ && enclosing_->deadline_ <= deadline_) {
    deadline_ = enclosing_->deadline_;
    what_ = enclosing_->what_;
  }
  t_innermost = this;
}

StoreCallDeadline::~StoreCallDeadline() { t_innermost = enclosing_; }

StoreCallCutShort::~StoreCallCutShort() = default;

bool StoreCallDeadline::has_passed() {
  // A socket's poll() counts whole milliseconds and may return a little early: a wait that
  // ended this close to the deadline was ended by it.
  constexpr std::chrono::milliseconds kTolerance{10};
  return t_innermost && t_innermost->deadline_ != std::chrono::steady_clock::time_point::max() &&
         std::chrono::steady_clock::now() + kTolerance >= t_innermost->deadline_;
}

std::optional<std::chrono::milliseconds> StoreCallDeadline::time_left(const char* call) {
  const StoreCallDeadline* scope = t_innermost;
  if (!scope) return std::nullopt;
  if (scope->deadline_ == std::chrono::steady_clock::time_point::max()) return std::nullopt;
  // Rounded up: a wait given this ends at the deadline, not just before it (has_passed).
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(scope->deadline_ - std::chrono::steady_clock::now());
  if (left <= std::chrono::milliseconds::zero()) {
    throw StoreCallCutShort(std::string("store ") + call + " not made: the deadline of " + scope->what_ + " has passed",
                            StoreCallCutShort::kNotMade);
  }
  return left;
}

std::string StoreCallDeadline::scope_name() {
  return t_innermost ? "the deadline of " + t_innermost->what_ : std::string();
}

std::chrono::milliseconds within_call_deadline(std::chrono::milliseconds t, const char* call) {
  const std::optional<std::chrono::milliseconds> left = StoreCallDeadline::time_left(call);
  return left ? std::min(t, *left) : t;
}

}  // namespace internal
}  // namespace distcomm
