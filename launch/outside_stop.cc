#include "launch/outside_stop.h"

#include <signal.h>
#include <sys/wait.h>

#include "launch/signal_watch.h"

namespace distcomm {
namespace launch {
namespace {

// "rank 3", "ranks 0, 1, 2"
std::string ranks_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

bool ended_by_outside_stop(const local::Child& c) {
  return !c.running && !c.stopped && WIFSIGNALED(c.status) && stops_the_job(WTERMSIG(c.status));
}

bool exited_as_if_stopped(const local::Child& c) {
  return !c.running && !c.stopped && WIFEXITED(c.status) && WEXITSTATUS(c.status) > 128 &&
         stops_the_job(WEXITSTATUS(c.status) - 128);
}

std::string outside_stop_note(const local::Child& c) {
  return ended_by_outside_stop(c) ? " from outside the launcher (it sent none)" : "";
}

bool OutsideStopHold::holds(const local::Child& c, Clock::time_point now) {
  if (over_ || !(ended_by_outside_stop(c) || exited_as_if_stopped(c))) return false;
  if (!until_) until_ = now + kOutsideStopHold;
  if (now < *until_) return true;
  over_ = true;
  return false;
}

std::optional<OutsideStopHold::Clock::time_point> OutsideStopHold::until() const {
  if (over_) return std::nullopt;
  return until_;
}

std::string outside_sender_text(int sig) {
  return sig == SIGINT ? "(a Ctrl-C, or a kill from outside)"
                       : "from outside (a scheduler's cancel, preemption or eviction, or a kill)";
}

namespace {

// What the lines of a stop say of the ranks, after its cause: how each ended.
std::string ranks_of_the_stop(const std::string& name, const std::vector<int>& outside, const std::vector<int>& stopped,
                              const std::vector<std::string>& failed_before,
                              const std::vector<std::string>& ended_with_stop, const std::string& launcher) {
  std::string text;
  if (failed_before.empty()) {
    text += ", not by a failure: no rank failed on its own";
  } else {
    text += "; before it";
    for (size_t i = 0; i < failed_before.size(); ++i) text += (i == 0 ? " " : ", ") + failed_before[i];
    text += " had failed";
  }
  if (!outside.empty()) text += "; " + ranks_list(outside) + " got " + name + " from outside too";
  if (!ended_with_stop.empty()) {
    text += "; ";
    for (size_t i = 0; i < ended_with_stop.size(); ++i) text += (i == 0 ? "" : ", ") + ended_with_stop[i];
    text += (ended_with_stop.size() == 1 ? " ended on its own" : " ended on their own") +
            std::string(" as the signal came (a handler of theirs, likely): part of the stop, not a failure");
  }
  if (!stopped.empty()) {
    text += "; " + ranks_list(stopped) + (stopped.size() == 1 ? " was" : " were") + " stopped by " + launcher;
  }
  return text;
}

std::string exit_status_text(int sig) {
  return "; exit status " + std::to_string(128 + sig) + " (128 + " + std::to_string(sig) + ")";
}

}  // namespace

std::string stopped_from_outside_text(int sig, const std::vector<int>& outside, const std::vector<int>& stopped,
                                      const std::vector<std::string>& failed_before, const std::string& sender,
                                      const std::vector<std::string>& ended_with_stop) {
  const std::string name = local::signal_name(sig);
  const std::string from = "sent to the launcher " + outside_sender_text(sig) + (sender.empty() ? "" : " by " + sender);
  return "the job was stopped by " + name + " " + from +
         ranks_of_the_stop(name, outside, stopped, failed_before, ended_with_stop, "the launcher") +
         exit_status_text(sig);
}

std::string stopped_elsewhere_text(int sig, const std::string& why, const std::vector<int>& outside,
                                   const std::vector<int>& stopped, const std::vector<std::string>& failed_before,
                                   bool node0_lost) {
  return (node0_lost ? "" : "the job was stopped on node 0: ") + why +
         ranks_of_the_stop(local::signal_name(sig), outside, stopped, failed_before, {}, "this machine's launcher") +
         exit_status_text(sig);
}

}  // namespace launch
}  // namespace distcomm
