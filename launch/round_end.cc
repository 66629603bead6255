#include "launch/round_end.h"

#include <signal.h>

#include <cstdlib>
#include <string>

#include "launch/outside_stop.h"

namespace distcomm {
namespace launch {
namespace {

constexpr char kInterrupted[] = "interrupted:";
constexpr char kInterruptedAtTerminal[] = "interrupted_at_terminal:";
constexpr char kJobStopped[] = "job_stopped:";
constexpr char kJobStoppedAtTerminal[] = "job_stopped_at_terminal:";
// The words an older launcher (no cause field) wrote when a signal made it leave.
constexpr char kOldInterruptedWords[] = " left: interrupted (";

// The signal number after `prefix` in `text`; 0 when there is none or it is malformed.
int signal_after(const std::string& text, const char* prefix, size_t prefix_size) {
  if (text.rfind(prefix, 0) != 0) return 0;
  const std::string number = text.substr(prefix_size - 1);
  if (number.empty() || number.size() > 2 || number.find_first_not_of("0123456789") != std::string::npos) return 0;
  const int sig = std::atoi(number.c_str());
  return sig > 0 && sig <= 64 ? sig : 0;
}

// An exit status, 0 to 255, in plain digits; nullopt for anything else: a value past an
// int ("99999999999") once wrapped into another code (1215752191), and a sign or spaces are
// no launcher's writing.
std::optional<int> exit_code_of(const std::string& text) {
  if (text.empty() || text.size() > 3 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int code = std::atoi(text.c_str());
  if (code > 255) return std::nullopt;
  return code;
}

std::string cause_text(const RoundEnd& e) {
  switch (e.cause) {
    case RoundEndCause::kRankFailed:
      return "rank_failed";
    case RoundEndCause::kLauncherInterrupted:
      return (e.from_terminal ? kInterruptedAtTerminal : kInterrupted) + std::to_string(e.signal);
    case RoundEndCause::kJobStopped:
      return (e.from_terminal ? kJobStoppedAtTerminal : kJobStopped) + std::to_string(e.signal);
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
  struct WithSignal {
    const char* prefix;
    size_t size;
    RoundEndCause cause;
    bool terminal;
  };
  static const WithSignal kWithSignal[] = {
      {kInterruptedAtTerminal, sizeof(kInterruptedAtTerminal), RoundEndCause::kLauncherInterrupted, true},
      {kInterrupted, sizeof(kInterrupted), RoundEndCause::kLauncherInterrupted, false},
      {kJobStoppedAtTerminal, sizeof(kJobStoppedAtTerminal), RoundEndCause::kJobStopped, true},
      {kJobStopped, sizeof(kJobStopped), RoundEndCause::kJobStopped, false},
  };
  for (const WithSignal& w : kWithSignal) {
    if (text.rfind(w.prefix, 0) != 0) continue;
    const int sig = signal_after(text, w.prefix, w.size);
    if (sig == 0) return false;
    e.cause = w.cause;
    e.signal = sig;
    e.from_terminal = w.terminal;
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
  // Exactly one of the two words every launcher has written: anything else ("", "restrat")
  // is no launcher's end, and read as a membership change it would have counted no restart.
  const std::string kind = text.substr(0, a);
  if (kind != "restart" && kind != "membership") return std::nullopt;
  RoundEnd e;
  e.restart = kind == "restart";
  const std::optional<int> code = exit_code_of(text.substr(a + 1, b - a - 1));
  if (!code) return std::nullopt;
  e.exit_code = *code;
  const size_t c = text.find('|', b + 1);
  // Without a cause field (an older launcher's end), or a why that merely holds a '|'.
  if (c != std::string::npos && read_cause(text.substr(b + 1, c - b - 1), e)) {
    e.why = text.substr(c + 1);
  } else {
    e.why = text.substr(b + 1);
  }
  return e;
}

RoundEnd interrupted_end(const std::string& why, int sig, bool from_terminal) {
  RoundEnd e{true, 1, why, RoundEndCause::kLauncherInterrupted, sig};
  e.from_terminal = from_terminal;
  if (after_round_end(e).removed_on_purpose) {
    // A machine removed on purpose is a membership change, as a machine joining is: no
    // failure, so no restart is counted (torchrun's membership changes do not count against
    // max_restarts either). Counted, it left the others "gave up" under --max_restarts=0.
    e.restart = false;
    e.exit_code = 0;
  }
  return e;
}

RoundEnd job_stop_end(const std::string& why, int sig, bool from_terminal) {
  RoundEnd e{false, 128 + sig, why, RoundEndCause::kJobStopped, sig};
  e.from_terminal = from_terminal;
  return e;
}

AfterRoundEnd after_round_end(const RoundEnd& end) {
  AfterRoundEnd after;
  if (end.cause == RoundEndCause::kJobStopped) {
    // The store is going: no new round can form, and nothing is left to hold for.
    after.job_stopped = true;
    return after;
  }
  if (end.cause == RoundEndCause::kUnknown) {
    // An older launcher's end carries no cause: its words are all there is (they said every
    // departure by a signal this way, and it held for every one).
    if (end.why.find(kOldInterruptedWords) != std::string::npos) after.hold_for_own_stop = kOutsideStopHold;
    return after;
  }
  if (end.cause != RoundEndCause::kLauncherInterrupted) return after;
  if (end.from_terminal && (end.signal == SIGINT || end.signal == SIGQUIT)) {
    // A Ctrl-C or Ctrl-\ at that machine's terminal: the kernel sends it to that machine alone.
    after.removed_on_purpose = true;
  } else {
    // SIGTERM is what schedulers send every process of a job they stop, and a SIGINT or
    // SIGHUP sent with kill (scancel --signal, srun forwarding a Ctrl-C, ssh sessions
    // closing) may be the whole job's too: this machine's may follow.
    after.hold_for_own_stop = kOutsideStopHold;
  }
  return after;
}

}  // namespace launch
}  // namespace distcomm
