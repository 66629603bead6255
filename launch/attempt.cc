// One attempt's running half (run_attempt, attempt.h): starting the ranks and their
// replacements, the loop that watches them (output, signals, the watch, the store), and
// stopping them (trace dumps first, then the signals), with the launcher's record. The
// class Attempt is declared in attempt_state.h; its failure-reporting methods (how a rank
// ended, which failed first) are in attempt_failures.cc, apart to keep each file short.
#include "launch/attempt.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "api/diagnostics/json_text.h"
#include "api/process/failure_report.h"
#include "api/process/local_processes.h"
#include "api/process/local_ranks.h"
#include "launch/attempt_state.h"
#include "launch/dump_request.h"
#include "launch/duration_text.h"
#include "launch/error_dir.h"
#include "launch/job_outcome.h"
#include "launch/node_roll_call.h"
#include "launch/output_pump.h"
#include "launch/rank_environment.h"
#include "launch/rank_process.h"
#include "launch/rank_stops.h"
#include "launch/refused_member.h"
#include "launch/replacement_notice.h"
#include "launch/signal_watch.h"
#include "launch/trace_folder.h"
#include "api/process/write_fully.h"

extern char** environ;

namespace distcomm {
namespace launch {
namespace internal {
namespace {

// Output written after the last rank exited (by processes they left behind, or still in
// the pipes) is read for this long at most.
constexpr std::chrono::milliseconds kDrainAfterExit{500};
// Node 0's launcher, waiting for the other machines' launchers to say how their ranks ended,
// looks at its roll call and its signals this often.
constexpr std::chrono::milliseconds kRollCallLook{200};

}  // namespace

local::Child Attempt::start_one(const std::string& path, int port, int local, int number) {
  const int rank = options_.global_rank(local);
  const std::string error_file =
      error_dir_.empty() ? ""
                         : error_dir_ + "/rank_" + std::to_string(rank) +
                               (number > 0 ? "+" + std::to_string(number) : std::string()) + ".error";
  std::vector<std::string> env = rank_environment(options_, local, port, environ, error_file);
  if (number > 0) env = replacement_environment(std::move(env), rank, number);
  RankProcess p = start_rank(path, options_.command, env, options_.working_dir, local, rank);
  try {
    p.error_file = error_file;
    p.member_id = member_id_of(rank, number);
    pump_.add(p.stdout_fd, p.rank, Stream::kStdout);
    pump_.add(p.stderr_fd, p.rank, Stream::kStderr);
    processes_.push_back(p);
    local::Child child = local::watched_child(p.pid, /*report_fd=*/-1, /*own_group=*/true);
    child.rank = p.rank;  // replacements share their rank (LocalRanks::first_failure)
    return child;
  } catch (...) {
    // Not yet among the watched ranks, so the cleanup of a failed start would miss it:
    // it is stopped here (it leads its own process group), then the start fails.
    ::kill(-p.pid, SIGKILL);
    ::waitpid(p.pid, nullptr, 0);
    throw;
  }
}

void Attempt::start_all(const std::string& path, int port) {
  replaced_.assign(static_cast<size_t>(options_.nproc_per_node), 0);
  // A rank that cannot start stops those started before it (no rank is left running).
  ranks_.start(options_.nproc_per_node, [&](int local) { return start_one(path, port, local, 0); });
}

bool Attempt::nobody_to_join() const {
  if (ranks_.running() > 0) return false;
  if (options_.nnodes == 1) return true;
  for (size_t i = 0; i < processes_.size(); ++i) {
    if (!ranks_[i].running && local::exited_cleanly(ranks_[i].status)) return true;
  }
  return false;
}

void Attempt::start_due_replacements(const std::string& path, int port) {
  if (replacements_.empty() || ranks_.stopping()) return;
  const Clock::time_point now = Clock::now();
  for (auto it = replacements_.begin(); it != replacements_.end();) {
    if (it->due > now) {
      ++it;
      continue;
    }
    // Nobody left to join (nobody_to_join: with several machines, another machine's ranks may
    // run on and take it in): the job has ended (or failed everywhere); it would wait alone.
    const std::string ended = member_id_of(options_.global_rank(it->local_rank), it->number - 1);
    if (nobody_to_join()) {
      say("rank " + std::to_string(options_.global_rank(it->local_rank)) +
          "'s replacement is not started: no rank runs any more");
      announce_no_successor(store_, options_, ended, "no rank ran any more when it was due");
    } else {
      try {
        ranks_.add(start_one(path, port, it->local_rank, it->number));
        const RankProcess& p = processes_.back();
        say("started rank " + std::to_string(p.rank) + "'s replacement " + std::to_string(it->number) + " (pid " +
            std::to_string(p.pid) + ", member rank" + std::to_string(p.rank) + "+" + std::to_string(it->number) +
            ") to join the running ranks (--replace_after_s)");
      } catch (const std::exception& e) {
        say("cannot start rank " + std::to_string(options_.global_rank(it->local_rank)) + "'s replacement: " + e.what());
        announce_no_successor(store_, options_, ended, std::string("its replacement could not start: ") + e.what());
      }
    }
    it = replacements_.erase(it);
  }
}

void Attempt::begin_stop(local::StopCause cause, const std::string& why) {
  // The last look at who is stopped (SIGSTOP, SIGTSTP): the stop continues them (SIGCONT
  // with its signal), and a rank frozen in a hang then runs on as if it had only been late.
  // The record keeps what is seen now (analyze names it), and the line says it.
  const bool first_stop = !stops_.frozen();  // a stop begun again (not expected) says nothing twice
  look_for_stopped_ranks(true);
  stops_.freeze();
  for (size_t i = 0; i < processes_.size() && first_stop; ++i) {
    const RankStops::Stop* s = stops_.of(i);
    if (s == nullptr) continue;
    say("rank " + std::to_string(processes_[i].rank) + " (pid " + std::to_string(ranks_[i].pid) +
        ") is stopped (SIGSTOP, SIGTSTP: frozen), seen so for " +
        seconds_text(std::chrono::milliseconds((s->seen_ns - s->since_ns) / 1'000'000)) +
        ": the stop continues it (SIGCONT)");
  }
  ranks_.begin_stop(cause);
  result_.stop_began = Clock::now();
  // Ranks that dump only on SIGTERM (an inherited DISTCOMM_TRACE_DIR) are asked first when
  // they are to get another signal.
  const std::string dump_dir = !options_.trace_dir.empty() ? options_.trace_dir
                               : stop_signal_ != SIGTERM   ? options_.inherited_trace_dir
                                                           : std::string();
  if (!dump_dir.empty()) {
    std::vector<std::pair<int, pid_t>> running;
    for (size_t i = 0; i < processes_.size(); ++i) {
      if (ranks_[i].running) running.emplace_back(processes_[i].rank, ranks_[i].pid);
    }
    dumps_.ask(dump_dir, running, options_.dump_wait);
    const size_t asked = dumps_.asked();
    if (dumps_.pending()) {
      say(why + ": asking " + std::to_string(asked) + (asked == 1 ? " rank" : " ranks") +
          " for a trace dump (SIGUSR1) into " + dump_dir);
    }
    if (!dumps_.not_handling().empty()) {
      std::string list;
      for (int r : dumps_.not_handling()) list += (list.empty() ? "" : ", ") + std::to_string(r);
      say("no trace dump asked of rank(s) " + list +
          ": no SIGUSR1 handler (a rank installs it with its first group: still starting?), so the signal would end "
          "them, or stopped (SIGSTOP, SIGTSTP), so they could not write one");
    }
    if (dumps_.pending()) {
      stop_reason_ = why;
      return;  // terminate() once they are written (see run())
    }
  }
  terminate(why);
}

void Attempt::prepare_trace_files() {
  if (!options_.trace_dir.empty()) {
    for (const std::string& line :
         set_aside_earlier_trace_files(options_.trace_dir, options_.identity.run_id, options_.nnodes == 1)) {
      say(line);
    }
  }
  if (!options_.timeline.empty()) ::unlink(options_.timeline.c_str());
}

namespace {

// A rank's stop by job control as the record says it: when the launcher first saw it
// stopped, and last (as the job's stop began, which continued it); "" when not stopped.
std::string stop_json(const RankStops::Stop* s) {
  if (s == nullptr) return "";
  return ",\"job_control_stop\":{\"since_ns\":" + std::to_string(s->since_ns) +
         ",\"seen_ns\":" + std::to_string(s->seen_ns) + "}";
}

}  // namespace

void Attempt::look_for_stopped_ranks(bool now_anyway) {
  std::vector<std::pair<size_t, pid_t>> running;
  for (size_t i = 0; i < processes_.size(); ++i) {
    if (ranks_[i].running) running.emplace_back(i, ranks_[i].pid);
  }
  stops_.look(running, now_anyway);
}

void Attempt::write_launcher_record() {
  if (options_.trace_dir.empty()) return;
  std::string ranks;
  for (size_t i = 0; i < processes_.size(); ++i) {
    const RankProcess& p = processes_[i];
    const local::Child& c = ranks_[i];
    std::string error;
    if (!p.error_file.empty()) {
      if (const std::optional<FailureReport> report = FailureReport::read(p.error_file)) {
        error = report->message.substr(0, report->message.find('\n'));
      }
    }
    ranks += std::string(ranks.empty() ? "\n  " : ",\n  ") + "{\"rank\":" + std::to_string(p.rank) +
             ",\"local_rank\":" + std::to_string(p.local_rank) + ",\"pid\":" + std::to_string(c.pid) +
             ",\"ended\":" + json_quote(c.running ? "still running" : how_ended(i)) +
             ",\"exit_code\":" + std::to_string(c.running ? -1 : local::shell_exit_code(c.status)) +
             ",\"signal\":" +
             json_quote(!c.running && WIFSIGNALED(c.status) ? local::signal_name(WTERMSIG(c.status)) : "") +
             ",\"stopped_by_launcher\":" + (c.stopped ? "true" : "false") +
             ",\"failed\":" + (!c.running && !c.stopped && ranks_.failed(i) && refused_.count(i) == 0 ? "true" : "false") +
             (refused_.count(i) != 0 ? ",\"refused_by_members\":" + json_quote(refused_.at(i)) : std::string()) +
             ",\"ended_ns\":" + std::to_string(c.ended_ns) + stop_json(stops_.of(i)) +
             (error.empty() ? std::string() : ",\"error\":" + json_quote(error)) + "}";
  }
  std::string text = "{\"format\":\"distcomm-launcher-record\",\"version\":1,\"run_id\":" +
                     json_quote(options_.identity.run_id) + ",\"restart\":" + std::to_string(options_.restart_count) +
                     ",\"node_rank\":" + std::to_string(options_.node_rank) +
                     ",\"time_ns\":" + std::to_string(FailureReport::now_ns()) +
                     ",\"exit_code\":" + std::to_string(result_.exit_code) +
                     ",\"interrupted_by\":" +
                     json_quote(result_.interrupted_by != 0 ? local::signal_name(result_.interrupted_by) : "") +
                     ",\"first_failure\":";
  if (result_.failed_rank >= 0) {
    text += "{\"rank\":" + std::to_string(result_.failed_rank) + ",\"how\":" + json_quote(result_.how) +
            ",\"failure\":" + json_quote(result_.failure.substr(0, result_.failure.find('\n'))) + "}";
  } else {
    text += "null";
  }
  text += ",\"ranks\":[" + ranks + "]}\n";
  const std::string path = options_.trace_dir + "/launcher_node" + std::to_string(options_.node_rank) + ".json";
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write_fully(fd, text);
  if (fd >= 0) ::close(fd);
  ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    say("cannot write " + path + ": " + std::strerror(errno));
    ::unlink(tmp.c_str());
  }
}

void Attempt::terminate(const std::string& why) {
  const int unreaped = ranks_.running();
  // Ranks that already exited may have left processes in their group: stop those too. The
  // ranks dead but not yet reaped (a scheduler's signal reached them with this launcher's)
  // are reaped first, not stopped: the line counts only the live ones it stops.
  ranks_.terminate(options_.grace_period, stop_signal_);
  const int n = ranks_.running();
  const int ended = unreaped - n;
  const std::string gone = ended > 0 ? std::to_string(ended) + " had already ended" : std::string();
  if (n > 0) {
    say(why + ": stopping " + std::to_string(n) + (n == 1 ? " rank" : " ranks") +
        (gone.empty() ? "" : " (" + gone + ")") + " (" + local::signal_name(stop_signal_) + ", then SIGKILL after " +
        seconds_text(options_.grace_period) + ")");
  } else if (ended > 0) {
    say(why + ": no rank left to stop (" + gone + ")");
  }
}

void Attempt::make_error_dir() {
  const char* tmp = std::getenv("TMPDIR");
  // Without a folder the ranks report nothing, and the first failure seen is the cause: a
  // $TMPDIR that does not exist, or a read-only /tmp, must not silently cost the job its
  // error texts and the right rank's name. --log_dir (made by now) is the user's own
  // writable folder; /dev/shm is memory, like a small /tmp.
  std::string warning;
  error_dir_ = launch::make_error_dir(tmp && *tmp ? tmp : "/tmp", {options_.log_dir, "/dev/shm"}, &warning);
  if (!warning.empty()) say(warning);
}

void Attempt::remove_error_files() {
  if (error_dir_.empty()) return;
  for (const RankProcess& p : processes_) {
    if (!p.error_file.empty()) ::unlink(p.error_file.c_str());
  }
  ::rmdir(error_dir_.c_str());
}

void Attempt::kill_stragglers() {
  for (size_t i = 0; i < processes_.size(); ++i) {
    if (ranks_[i].running) say("rank " + std::to_string(processes_[i].rank) + " is still running: SIGKILL");
  }
  ranks_.kill();
}

void Attempt::handle_signals() {
  for (int sig : signals_.take()) {
    if (sig == SIGCHLD || sig == SIGPIPE) continue;  // reaping happens on every turn anyway
    if (sig == SIGUSR1) {
      ask_for_dumps_on_request();
      continue;
    }
    if (!ranks_.stopping()) {
      begin_outside_stop(sig);  // attempt_outside_stop.cc
      continue;
    }
    if (outside_stop_after_failure(sig)) continue;  // a graceful rank's exit came just before it
    if (result_.signal_while_stopping == 0) result_.signal_while_stopping = sig;
    // Impatience (a second Ctrl-C) skips the grace period, as in torchrun.
    if (!ranks_.killed()) kill_stragglers();
  }
}

std::string Attempt::rank_dump_dir() const {
  if (!options_.trace_dir.empty()) return options_.trace_dir;
  if (!options_.inherited_trace_dir.empty()) return options_.inherited_trace_dir;
  const char* tmp = std::getenv("TMPDIR");  // the ranks inherit the launcher's
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/distcomm_trace";
}

void Attempt::ask_for_dumps_on_request() {
  if (ranks_.stopping()) {
    say("got SIGUSR1 while stopping the job: no trace dump asked (the ranks dump as they stop, with a trace folder)");
    return;
  }
  const std::string dir = rank_dump_dir();
  std::vector<std::pair<int, pid_t>> running;
  for (size_t i = 0; i < processes_.size(); ++i) {
    if (ranks_[i].running) running.emplace_back(processes_[i].rank, ranks_[i].pid);
  }
  requested_dumps_.ask(dir, running, options_.dump_wait);
  const size_t asked = requested_dumps_.asked();
  const bool default_dir = options_.trace_dir.empty() && options_.inherited_trace_dir.empty();
  say("got SIGUSR1: asked " + std::to_string(asked) + (asked == 1 ? " rank" : " ranks") + " for a trace dump into " +
      dir +
      (default_dir ? " (no --trace_dir nor DISTCOMM_TRACE_DIR: the ranks' default, $TMPDIR/distcomm_trace)"
                   : std::string()) +
      "; the job runs on");
  if (!requested_dumps_.not_handling().empty()) {
    std::string list;
    for (int r : requested_dumps_.not_handling()) list += (list.empty() ? "" : ", ") + std::to_string(r);
    say("no trace dump asked of rank(s) " + list +
        ": no SIGUSR1 handler (a rank installs it with its first group: still starting?), so the signal would end "
        "them, or stopped (SIGSTOP, SIGTSTP), so they could not write one");
  }
}

void Attempt::handle_watch(const std::vector<pollfd>& fds) {
  if (watch_ == nullptr || ranks_.stopping()) return;
  for (const pollfd& p : fds) {
    if (p.fd != watch_->fd || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    std::string why = watch_->reason();
    if (why.empty()) return;
    result_.stopped_for = why;
    begin_stop(local::StopCause::kCaller, why);
  }
}

void Attempt::handle_doomed_store(const std::vector<pollfd>& fds) {
  if (store_ == nullptr || !doomed_.empty() || ranks_.stopping()) return;
  for (const pollfd& p : fds) {
    if (p.fd != store_->doomed_fd() || !(p.revents & POLLIN)) continue;
    doomed_ = store_->doomed();
    if (doomed_.empty()) return;
    begin_stop(local::StopCause::kCaller, "the job cannot run");
  }
}

void Attempt::handle_fenced_members(const std::vector<pollfd>& fds) {
  if (store_ == nullptr || store_->fenced_fd() < 0) return;
  for (const pollfd& p : fds) {
    if (p.fd != store_->fenced_fd() || !(p.revents & POLLIN)) continue;
    for (const local::FencedMember& member : store_->take_fenced()) {
      if (ranks_.stopping()) continue;  // the stop ends every rank anyway
      // Only a rank of this launcher, not yet reaped (so its pid is still its own), and
      // alive: one that has exited already ends as it did.
      for (size_t i = 0; i < processes_.size(); ++i) {
        if (!ranks_[i].running || !member.is_running_process(ranks_[i].pid)) continue;
        fenced_[i] = "member " + member.id + ": " + member.why;
        ::kill(-ranks_[i].pid, SIGKILL);  // it leads its own process group: what it started goes too
      }
    }
  }
}

std::string Attempt::member_text(size_t i) const {
  const RankProcess& p = processes_[i];
  const bool replacement = p.member_id.find('+') != std::string::npos;
  return "rank " + std::to_string(p.rank) + (replacement ? "'s replacement" : std::string()) + " (member " +
         p.member_id + ", pid " + std::to_string(p.pid) + ")";
}

void Attempt::note_refusal(size_t i, const std::string& why) {
  refused_[i] = why;
  const int local = processes_[i].local_rank;
  std::string after = ranks_[i].running ? "; it ends on its own" : "; it ended (" + how_ended(i) + ")";
  if (!ranks_[i].running && ranks_.failed(i)) {
    // Asked at its exit (ask_refusal), before that counted, there is nothing to undo below.
    // Found later (a mark written after the exit: a joiner that died of its misfit before
    // the members refused it), its exit was taken for a failure: what it set going is undone.
    const auto due = std::find_if(replacements_.begin(), replacements_.end(),
                                  [&](const Replacement& r) { return r.local_rank == local; });
    if (due != replacements_.end()) {
      replacements_.erase(due);
      --replaced_[static_cast<size_t>(local)];
      after += "; the replacement its exit asked for is not started";
      announce_no_successor(store_, options_, processes_[i].member_id, "refused by the members");
    } else {
      for (size_t j = i + 1; j < processes_.size(); ++j) {
        if (processes_[j].local_rank == local) after += "; " + member_text(j) + " had been started for it already";
      }
    }
    if (result_.failed_rank >= 0 && result_.failure == failed_line(i)) {
      // The job's failure was this exit: it is the earliest other failure now, if any.
      int next = -1;
      for (size_t j = 0; j < processes_.size(); ++j) {
        if (refused_.count(j) != 0 || !ranks_.failed(j) || ranks_[j].stopped) continue;
        if (next < 0 || ranks_[j].ended_ns < ranks_[static_cast<size_t>(next)].ended_ns) next = static_cast<int>(j);
      }
      if (next >= 0) {
        note_failure(static_cast<size_t>(next));
      } else {
        result_.failed_rank = -1;
        result_.exit_code = 0;
        result_.failure.clear();
        result_.how.clear();
      }
    }
  }
  say(member_text(i) + " was refused by the fault-tolerant job's members, which go on without it: " + why + after +
      ". Its exit is not the job's failure, and it is not replaced: the same program would be refused again");
}

void Attempt::handle_stopped_leftovers() {
  std::string stopped;
  bool all_stopped = !ranks_.stopping() && result_.failed_rank >= 0 && replacements_.empty();
  for (size_t i = 0; i < processes_.size() && all_stopped; ++i) {
    if (!ranks_[i].running) continue;
    all_stopped = stopped_by_job_control(ranks_[i].pid);
    stopped += (stopped.empty() ? "" : ", ") + std::to_string(processes_[i].rank);
  }
  if (!all_stopped || stopped.empty()) {
    all_stopped_since_ = {};
    return;
  }
  const Clock::time_point now = Clock::now();
  if (all_stopped_since_ == Clock::time_point{}) all_stopped_since_ = now;
  if (now - all_stopped_since_ < options_.grace_period) return;
  begin_stop(local::StopCause::kFailure,
             "rank(s) " + stopped + " stopped by job control (SIGSTOP, SIGTSTP) for " + seconds_text(options_.grace_period) +
                 " while every other rank here has ended after a failure: nothing in the job can resume them");
}

// Processes a rank started and left behind when it exited come to the launcher (a child
// subreaper) and keep the rank's process group. Reaps those that ended; true while some of
// them live. Only groups of ranks already reaped are waited on, so that a rank's own exit
// status is never taken here.
bool Attempt::reap_leftovers() {
  bool alive = false;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i].running) continue;
    pid_t r;
    while ((r = ::waitpid(-ranks_[i].pid, nullptr, WNOHANG)) > 0) {
    }
    if (r == 0) alive = true;
  }
  return alive;
}

int Attempt::poll_timeout_ms() const {
  if (dumps_.pending()) return static_cast<int>(dumps_.poll_interval().count());
  if (requested_dumps_.pending()) return static_cast<int>(requested_dumps_.poll_interval().count());
  int ms = 1000;
  if (const auto until = outside_hold_.until()) {  // a failure waits for the launcher's own signal
    ms = std::min<int>(ms, static_cast<int>(std::max<int64_t>(
                               std::chrono::ceil<std::chrono::milliseconds>(*until - Clock::now()).count(), 0)));
  }
  for (const Replacement& r : replacements_) {  // wake for the next replacement due
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(r.due - Clock::now()).count();
    ms = std::min<int>(ms, static_cast<int>(std::max<int64_t>(left, 0)));
  }
  // Otherwise SIGCHLD wakes the poll, and ranks_ shortens it to the end of a grace; the
  // timeout only guards against a lost wake-up.
  return ms;
}

namespace {

// Another machine's launcher beats, node 0's watches (node_roll_call.h): a static job
// across machines whose launchers serve the job's store, under tools/launch.
std::unique_ptr<NodeRollCall> open_roll_call(const LaunchOptions& o, int port) {
  if (o.nnodes <= 1 || !o.serve_store || !node_roll_call_opener()) return nullptr;
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  const std::string who = rank_span_text(o.global_rank(0), o.nproc_per_node) + " on " + host + ", launcher pid " +
                          std::to_string(::getpid());
  return node_roll_call_opener()(JobStoreAddress{o.master_addr, port, o.identity}, o.nnodes, o.node_rank,
                                 o.restart_count, who);
}

// The roll call's end. Another machine's launcher says how its ranks ended. Node 0's, when
// its ranks exited 0, waits until every other machine's launcher said how its ranks ended or
// went silent, polling its signals meanwhile: a stopping signal ends the wait, and the job,
// as its interruption (returned: 0 if none). One deadline, options.other_machines_wait after
// this machine's ranks ended, bounds that wait and the store's farewell after it
// (JobStore::leave_by), whose one line says how long the store was kept. The others' ends go
// to result (others_clean, others_not_clean; a machine lost in a fault-tolerant job to
// survived) for the last line (job_outcome.h); after a stop, end_wait_on_stop reads them.
int close_roll_call(NodeRollCall* roll_call, JobStore* store, SignalWatch& signals, const LaunchOptions& options,
                    JobResult& result, const std::function<void(const std::string&)>& say) {
  const bool succeeded = result.exit_code == 0 && result.interrupted_by == 0;
  if (options.node_rank != 0) {
    if (roll_call != nullptr) roll_call->ended(succeeded ? kRanksExitedZero : kRanksFailed);
    return 0;
  }
  if (options.nnodes <= 1) return 0;
  const Clock::time_point ranks_ended = Clock::now();
  const Clock::time_point deadline = ranks_ended + options.other_machines_wait;
  if (store != nullptr) store->leave_by(deadline, ranks_ended);
  // Only a job that succeeded here waits for the other machines' word: a failed one's last
  // line is its failure, and its launcher must not linger for it.
  if (roll_call == nullptr || !succeeded) return 0;
  // A wait that may last: the launcher says why it has not ended (a Ctrl-C ends it).
  char bound[32];
  std::snprintf(bound, sizeof(bound), "%g s", options.other_machines_wait.count() / 1000.0);
  if (!roll_call->settled()) {
    say("this machine's " + rank_span_text(options.global_rank(0), options.nproc_per_node) + " exited 0; waiting up to " +
        bound + " for the other machines' launchers to say how their ranks ended");
  }
  int stop = 0;
  bool left = false;  // node 0's farewell is in its store (NodeRollCall::leave)
  while (stop == 0 && !roll_call->settled() && Clock::now() < deadline) {
    // The wait's last kNode0FarewellReach: the launchers still running ranks read at a beat
    // that node 0's leaves on purpose, and watch their ranks on (not taken for a loss).
    if (!left && deadline - Clock::now() <= kNode0FarewellReach) {
      left = roll_call->leave("node 0's launcher stopped waiting for the other machines' ranks " + std::string(bound) +
                              " after its own exited 0");
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{signals.fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min(left, kRollCallLook).count()));
    for (int sig : signals.take()) {
      if (stop == 0 && stops_the_job(sig)) stop = sig;
    }
  }
  if (stop != 0) {
    if (store != nullptr) store->leave_by(Clock::now(), Clock::time_point());  // no farewell wait
    // The others' ends are read after they are told of the stop (end_wait_on_stop): read
    // now, a machine that reads it meanwhile would be named as it was before.
    return stop;
  }
  for (const OtherMachine& m : roll_call->others()) {
    if (m.state == OtherMachine::State::kExitedZero) continue;
    if (m.state == OtherMachine::State::kLost && options.on_failure == LaunchOptions::OnFailure::kContinue) {
      result.survived.push_back(other_machine_text(m));  // the job was made to go on without it
    } else {
      result.others_not_clean.push_back(other_machine_text(m));
    }
  }
  result.others_clean = result.others_not_clean.empty();
  return 0;
}

}  // namespace

JobResult Attempt::run() {
  // Orphans of the ranks are reparented to the launcher, which can then reap them, instead
  // of to init, which may leave them as zombies for a while.
  int was_subreaper = 0;
  ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct RestoreSubreaper {
    int value;
    ~RestoreSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, value); }
  } restore{was_subreaper};
  std::string path = find_program(options_.command[0], options_.working_dir);
  // Node 0's launcher serves the attempt's store (job_store.h), listening before the first
  // rank starts; it is destroyed as run() returns, after every rank was reaped, so it
  // outlives them all. The attempt's identity is its own: a rank of another attempt is
  // refused. Otherwise rank 0 (or node 0's launcher) serves it.
  std::unique_ptr<JobStore> store;
  if (options_.serve_store && options_.node_rank == 0) {
    store = options_.serve_store(JobStoreRequest{options_.master_addr, options_.master_port, options_.store_bind,
                                                 options_.identity, options_.world_size(), options_.nnodes,
                                                 options_.nproc_per_node});
    result_.master_port = store->port();
    store_ = store.get();
  } else {
    result_.master_port = options_.master_port != 0 ? options_.master_port : local::pick_free_port();
    if (options_.serve_store && options_.nnodes > 1) {
      // Another machine's launcher: node 0's store, read for this launcher's refused
      // joiners (refusal_reader.h). Its shape was checked before the first attempt (run_job).
      store = options_.serve_store(JobStoreRequest{options_.master_addr, result_.master_port, options_.store_bind,
                                                   options_.identity, options_.world_size(), options_.nnodes,
                                                   options_.nproc_per_node, options_.node_rank,
                                                   /*reader_only=*/true});
      store_ = store.get();
    }
  }
  open_failure_board();  // each machine's first failure, job-wide (job_failure_board.h)
  // Which machines the job lost (node_roll_call.h). After the store: it goes first, and its
  // connections to node 0's store are closed before that store's farewell.
  std::unique_ptr<NodeRollCall> roll_call = open_roll_call(options_, result_.master_port);
  roll_call_ = roll_call.get();
  make_error_dir();
  prepare_trace_files();
  dumps_.attempt_began();
  requested_dumps_.attempt_began();
  struct RemoveErrorFiles {
    Attempt* job;
    ~RemoveErrorFiles() { job->remove_error_files(); }
  } remove{this};
  // Before any rank can end: a fault-tolerant job's survivors learn which ranks are replaced.
  announce_replaced_ranks(store_, options_);
  start_all(path, result_.master_port);

  Clock::time_point drain_deadline;
  Clock::time_point turn_began;
  bool was_held_back = false;  // in the last turn, some pipes were not read (a slow reader)
  while (true) {
    int running = ranks_.running();
    bool leftovers = reap_leftovers();
    // A stopped job ends when its last process does; after a clean exit the launcher does
    // not wait for daemons the ranks chose to leave running.
    // With several machines a replacement still due keeps it going, though none of its ranks
    // runs (report_failures_and_continue): the other machines' ranks may take it in. On one
    // machine, or once a rank here ended cleanly, nobody would (nobody_to_join): it has ended.
    const bool replacement_due = !replacements_.empty() && !ranks_.stopping() && !nobody_to_join();
    // A failure by an outside stopping signal waits for the launcher's own (outside_stop.h),
    // though no rank runs: the job's end is the signal's, or the failure's after the wait.
    const bool outside_hold = outside_hold_.until().has_value() && !ranks_.stopping();
    if (running == 0 && !replacement_due && !outside_hold && !(ranks_.stopping() && leftovers)) {
      const Clock::time_point now = Clock::now();
      if (drain_deadline == Clock::time_point()) {
        drain_deadline = now + kDrainAfterExit;
      } else if (was_held_back) {
        // The pipes were not read while the terminal's reader was behind: that time does not
        // count, or the ranks' last lines, still in their pipes, would be lost to a slow reader.
        drain_deadline += now - turn_began;
      }
      if (pump_.all_closed() || now >= drain_deadline) break;
    } else if (running > 0) {
      drain_deadline = {};  // ranks run again (a replacement started)
    }
    turn_began = Clock::now();
    was_held_back = pump_.held_back();
    // The ranks' pipes (those whose terminal's reader keeps up: output_pump.h), signals and
    // rank exits are all handled here, and nothing here waits for a reader of the output.
    std::vector<pollfd> fds = pump_.poll_set();
    fds.push_back(pollfd{signals_.fd(), POLLIN, 0});
    if (watch_ != nullptr && !ranks_.stopping()) fds.push_back(pollfd{watch_->fd, POLLIN, 0});
    if (store_ != nullptr && !ranks_.stopping()) fds.push_back(pollfd{store_->doomed_fd(), POLLIN, 0});
    if (store_ != nullptr && store_->fenced_fd() >= 0 && !ranks_.stopping()) {
      fds.push_back(pollfd{store_->fenced_fd(), POLLIN, 0});
    }
    const int timeout = running == 0 && !replacement_due ? 50 : poll_timeout_ms();
    // Sleeps until output, a signal or a rank's exit (pidfds), and reaps who exited.
    const std::vector<size_t> exited = ranks_.watch_once(std::chrono::milliseconds(timeout), &fds);
    for (const pollfd& p : fds) {
      if (p.fd != signals_.fd() && (watch_ == nullptr || p.fd != watch_->fd) &&
          (store_ == nullptr || (p.fd != store_->doomed_fd() && p.fd != store_->fenced_fd())) &&
          (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        pump_.on_ready(p.fd);
      }
    }
    // Ranks that ended before init (and will not be replaced): the store says so to the
    // others' init (job_store.h).
    if (store_ != nullptr && !ranks_.stopping() && options_.replace_after.count() < 0) {
      for (size_t i : exited) store_->rank_ended(processes_[i].rank, how_ended(i));
    }
    if (!ranks_.stopping()) look_for_stopped_ranks(false);
    handle_signals();
    handle_watch(fds);
    handle_doomed_store(fds);
    handle_fenced_members(fds);
    handle_stop_elsewhere();  // node 0's launcher stopped the job (attempt_job_stop.cc)
    if (options_.on_failure == LaunchOptions::OnFailure::kContinue) {
      report_failures_and_continue(exited);  // a refused joiner's exit is said as such (ask_refusal)
      ask_refusals_before_replacements();
      start_due_replacements(path, result_.master_port);
      handle_stopped_leftovers();
    } else {
      report_first_failure();
    }
    if (requested_dumps_.pending()) {
      const bool done = requested_dumps_.finished([&](int rank) {
        for (size_t i = 0; i < processes_.size(); ++i) {
          if (processes_[i].rank == rank) return ranks_[i].running;
        }
        return false;
      });
      if (done && !requested_dumps_.missing().empty()) {
        std::string list;
        for (int r : requested_dumps_.missing()) list += (list.empty() ? "" : ", ") + std::to_string(r);
        say("no trace dump (asked on SIGUSR1) from rank(s) " + list);
      } else if (done && requested_dumps_.asked() > 0) {
        say("trace dumps asked on SIGUSR1 written into " + rank_dump_dir() + " (distcomm-trace analyze " +
            rank_dump_dir() + ")");
      }
    }
    if (dumps_.pending()) {
      const bool done = dumps_.finished([&](int rank) {
        for (size_t i = 0; i < processes_.size(); ++i) {
          if (processes_[i].rank == rank) return ranks_[i].running;
        }
        return false;
      });
      if (done) {
        if (!dumps_.missing().empty()) {
          std::string list;
          for (int r : dumps_.missing()) list += (list.empty() ? "" : ", ") + std::to_string(r);
          say("no trace dump from rank(s) " + list);
        }
        terminate(stop_reason_);
      }
    } else if (ranks_.kill_due()) {
      kill_stragglers();
    }
  }
  pump_.close_all();
  take_refusals();  // a mark written after its process's exit still counts
  name_first_failure();
  judge_by_last_processes();
  if (result_.interrupted_by != 0) say_stopped_from_outside();  // the stop's one line, no culprit
  if (!doomed_.empty() && result_.interrupted_by == 0) {
    // No rank failed: the job as launched cannot run. Its last line says why, and a
    // restart (which would meet the same ranks) is not tried (failed_rank -1).
    result_.failed_rank = -1;
    result_.failure = doomed_;
    result_.how.clear();
    result_.exit_code = 1;
    say("the job cannot run: " + doomed_);
  }
  if (result_.interrupted_by != 0) result_.exit_code = 128 + result_.interrupted_by;
  if (const int stop = close_roll_call(roll_call.get(), store.get(), signals_, options_, result_,
                                       [this](const std::string& line) { say(line); })) {
    // This machine's ranks had exited 0; the job's end is not known here. The other
    // machines' ranks that still run are stopped by their launchers (attempt_job_stop.cc).
    result_.interrupted_by = stop;
    result_.exit_code = 128 + stop;
    end_wait_on_stop(stop, roll_call.get());
  }
  result_.first_rank = options_.global_rank(0);
  result_.local_ranks = options_.nproc_per_node;
  result_.world_size = options_.world_size();
  result_.node_rank = options_.node_rank;
  result_.nnodes = options_.nnodes;
  write_launcher_record();
  return result_;
}

}  // namespace internal

JobResult run_attempt(const LaunchOptions& options, SignalWatch& signals, const AttemptWatch* watch) {
  internal::Attempt attempt(options, signals, watch);
  return attempt.run();
}

}  // namespace launch
}  // namespace distcomm
