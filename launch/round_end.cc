#include "launch/round_end.h"

#include <signal.h>

#include <cstdlib>

#include "launch/outside_stop.h"

namespace distcomm {
namespace launch {
namespace {

constexpr char kInterrupted[] = "interrupted:";

std::string cause_text(const RoundEnd& e) {
  switch (e.cause) {
    case RoundEndCause::kRankFailed:
      return "rank_failed";
    case RoundEndCause::kLauncherInterrupted:
      return kInterrupted + std::to_string(e.signal);
    case RoundEndCause::kLauncherEnded:
      return "launcher_ended";
    case RoundEndCause::kLauncherWentAway:
      return "went_away";
    case RoundEndCause::kEveryoneWentAway:
      return "everyone_went_away";
    case RoundEndCause::kMachinesWait:
      return "machines_wait";
    case RoundEndCause::kUnknown:
      break;
  }
  return "unknown";
}

// Sets e's cause from its text; false when `text` names none (then e is left as it was).
bool read_cause(const std::string& text, RoundEnd& e) {
  if (text.rfind(kInterrupted, 0) == 0) {
    const std::string number = text.substr(sizeof(kInterrupted) - 1);
    char* end = nullptr;
    const long sig = std::strtol(number.c_str(), &end, 10);
    if (number.empty() || *end != '\0' || sig <= 0 || sig > 64) return false;
    e.cause = RoundEndCause::kLauncherInterrupted;
    e.signal = static_cast<int>(sig);
    return true;
  }
  static const std::pair<const char*, RoundEndCause> kNames[] = {
      {"rank_failed", RoundEndCause::kRankFailed},
      {"launcher_ended", RoundEndCause::kLauncherEnded},
      {"went_away", RoundEndCause::kLauncherWentAway},
      {"everyone_went_away", RoundEndCause::kEveryoneWentAway},
      {"machines_wait", RoundEndCause::kMachinesWait},
      {"unknown", RoundEndCause::kUnknown},
  };
  for (const auto& [name, cause] : kNames) {
    if (text == name) {
      e.cause = cause;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string encode_round_end(const RoundEnd& e) {
  return std::string(e.restart ? "restart" : "membership") + "|" + std::to_string(e.exit_code) + "|" + cause_text(e) +
         "|" + e.why;
}

std::optional<RoundEnd> decode_round_end(const std::string& text) {
  const size_t a = text.find('|');
  const size_t b = a == std::string::npos ? a : text.find('|', a + 1);
  if (b == std::string::npos) return std::nullopt;
  RoundEnd e;
  e.restart = text.substr(0, a) == "restart";
  const std::string code = text.substr(a + 1, b - a - 1);
  char* end = nullptr;
  e.exit_code = static_cast<int>(std::strtol(code.c_str(), &end, 10));
  if (code.empty() || *end != '\0') return std::nullopt;
  const size_t c = text.find('|', b + 1);
  // Without a cause field (an older launcher's end), or a why that merely holds a '|'.
  if (c != std::string::npos && read_cause(text.substr(b + 1, c - b - 1), e)) {
    e.why = text.substr(c + 1);
  } else {
    e.why = text.substr(b + 1);
  }
  return e;
}

AfterRoundEnd after_round_end(const RoundEnd& end) {
  AfterRoundEnd after;
  if (end.cause != RoundEndCause::kLauncherInterrupted) return after;
  switch (end.signal) {
    case SIGTERM:
      // What schedulers send every process of a job they stop: this machine's may follow.
      after.hold_for_own_stop = kOutsideStopHold;
      break;
    case SIGINT:
    case SIGQUIT:
    case SIGHUP:
      // What a user's terminal sends the launcher of that machine alone.
      after.removed_on_purpose = true;
      break;
    default:
      break;
  }
  return after;
}

}  // namespace launch
}  // namespace distcomm
