// The state of one attempt (attempt.h): the internal class Attempt behind run_attempt, its
// members and the declarations of its methods. Its methods live in two files, apart by
// what they do: attempt.cc starts, watches and stops the ranks; attempt_failures.cc says
// which ranks failed, and which one failed first. Internal to //launch:launcher (in its
// srcs, not its hdrs): nothing outside those two files includes it.
#pragma once

#include <poll.h>
#include <signal.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/process/failure_report.h"
#include "api/process/local_processes.h"
#include "api/process/local_ranks.h"
#include "launch/attempt.h"
#include "launch/dump_request.h"
#include "launch/job_failure_board.h"
#include "launch/job_store.h"
#include "launch/launch_options.h"
#include "launch/node_roll_call.h"
#include "launch/outside_stop.h"
#include "launch/output_pump.h"
#include "launch/rank_process.h"
#include "launch/rank_stops.h"
#include "launch/signal_watch.h"

namespace distcomm {
namespace launch {
namespace internal {

using Clock = std::chrono::steady_clock;

class Attempt {
 public:
  Attempt(const LaunchOptions& options, SignalWatch& signals, const AttemptWatch* watch)
      : options_(options), router_(options), pump_(router_), signals_(signals), watch_(watch), ranks_(watch_policy()) {}

  JobResult run();

 private:
  // The launcher stops its ranks itself: it asks them for trace dumps first, and says what
  // it does. A rank's report is its error file.
  local::RankWatchOptions watch_policy() {
    local::RankWatchOptions o;
    o.after_failure = local::AfterFailure::kCallerStops;
    o.adopted_failure_hold = local::kAdoptedFailureHold;
    o.adopted = [this](size_t i) {
      if (i >= processes_.size() || processes_[i].error_file.empty()) return false;
      const std::optional<FailureReport> report = FailureReport::read(processes_[i].error_file);
      return report && report->consequence;
    };
    return o;
  }
  // To stderr, queued behind the ranks' lines: never waits for a reader (output_pump.h).
  void say(const std::string& message) { router_.say(options_.tag + ": " + message); }
  void start_all(const std::string& path, int port);
  // Starts local rank `local` (a replacement when number > 0) and returns it watched.
  local::Child start_one(const std::string& path, int port, int local, int number);
  // No rank is left to take a replacement in: none of this machine's runs, and either this
  // is the job's only machine or one of this machine's ranks ended cleanly (the job's work
  // is done). With several machines, another machine's ranks may run on when all of this
  // one's died, and take its replacements in.
  bool nobody_to_join() const;
  // --replace_after_s: starts the replacements whose time has come, while ranks run.
  void start_due_replacements(const std::string& path, int port);
  // --on_failure=continue: the job succeeded if every rank's last process exited 0 (its
  // failed ranks were replaced); else one closing line says which ranks did not end well.
  void judge_by_last_processes();
  void handle_signals();
  // SIGUSR1 to the launcher: asks its running ranks for their trace dumps (into the trace
  // folder, else where the ranks dump by themselves) and carries on supervising the job.
  void ask_for_dumps_on_request();
  // The folder the ranks dump into when asked: --trace_dir, else the DISTCOMM_TRACE_DIR they
  // inherit, else the ranks' default ($TMPDIR/distcomm_trace, api/group/environment.cc).
  std::string rank_dump_dir() const;
  // Stops the ranks when the watch asks (once).
  void handle_watch(const std::vector<pollfd>& fds);
  // Stops the ranks when the store this launcher serves finds that the job cannot run
  // (job_store.h: a rank of another node counts another world size), once.
  void handle_doomed_store(const std::vector<pollfd>& fds);
  // Kills each rank that its fault-tolerant group fenced (taken for gone: stopped, or
  // stalled past the heartbeat timeout), as the store this launcher serves says
  // (JobStore::take_fenced): it is then a failed rank like any other.
  void handle_fenced_members(const std::vector<pollfd>& fds);
  // Asks the job's store (JobStore::ask, refused_member.h) whether the fault-tolerant
  // job's members refused processes_[i] for each i of `which`, and notes each refused one
  // (note_refusal): its exit is not a failure of the job, and no replacement is started for
  // it -- nor the one its exit already asked for, when the refusal comes after that exit.
  // Those already noted are not asked again. The same request asks whether the members
  // stopped the job (note_job_stopped). `must_ask`: asks even shortly after an ask failed
  // (JobStore::ask). A process whose ask was not answered is not counted as asked.
  // attempt_refusals.cc. False when the store was asked and did not answer.
  bool ask_refusals(const std::vector<size_t>& which, bool must_ask);
  // ask_refusals for `i` alone, unless it was asked already; true when it is a refused joiner.
  bool ask_refusal(size_t i);
  // Before start_due_replacements: asks again for the processes whose exits asked for the
  // replacements due now (a mark that came after the exit), so that none of them starts
  // the same refused program again.
  void ask_refusals_before_replacements();
  // At the end: asks for every process that failed and was not noted yet, for the job's
  // outcome (a refused joiner's exit is none of the job's failures).
  void take_refusals();
  // The members of the fault-tolerant job stopped it (`why`: the store's ft/stopped): no
  // replacement can join any more. Drops those due (said, and told to the members), and no
  // other is scheduled (report_failures_and_continue); said once.
  void note_job_stopped(const std::string& why);
  // Says, once, that processes_[i] was refused (`why`: its dead mark's reason).
  void note_refusal(size_t i, const std::string& why);
  // "rank 2's replacement (member rank2+1, pid 7)" for processes_[i].
  std::string member_text(size_t i) const;
  // How processes_[i] ended: its wait status, or that its group fenced it and this launcher
  // killed it.
  std::string how_ended(size_t i) const;
  // Reports the first rank that failed, seen before any stop, and stops the others.
  void report_first_failure();
  // With several machines and the job's store (job_failure_board.h): opens the board.
  void open_failure_board();
  // This machine's first failure, processes_[i]'s (its report, if it left one), as the
  // other machines' launchers read it.
  FailureNote note_of(size_t i, const std::optional<FailureReport>& report, const std::string& text) const;
  // Leaves processes_[i]'s failure on the job's board, and when `stopping`, marks the
  // ranks still running here as stopped by this launcher because of it (before the stop's
  // signal: api/process/launcher_stop.h).
  void publish_failure(size_t i, bool stopping);
  // At the end: `mine` is this machine's first failure; when another machine's launcher
  // left an earlier real one on the board, result_.failure says that one first, naming
  // the machine. True when it did.
  bool name_job_wide_failure(const FailureNote& mine);
  // "rank 1 (local rank 1, pid 7) failed: exit code 3" for processes_[i].
  std::string failed_line(size_t i) const;
  // The job's failure (result_) is rank i's, as its exit says.
  void note_failure(size_t i);
  // --on_failure=continue: reports each rank that failed among those that just exited, one
  // line each, and leaves the others running.
  void report_failures_and_continue(const std::vector<size_t>& exited);
  // --on_failure=continue, after a failure: the ranks still running here are all stopped by
  // job control (SIGSTOP, SIGTSTP; not a debugger's trace stop) and no replacement is due.
  // Nothing in the job will resume them, and the launcher would wait for them for ever:
  // once they have stayed so for the grace period, they are stopped as a failed job's are.
  void handle_stopped_leftovers();
  // With a trace folder: asks the ranks still running for their dumps first (they are
  // stopped once the dumps are written, or dump_wait has passed). Then terminate().
  void begin_stop(local::StopCause cause, const std::string& why);
  // SIGTERM to every rank, SIGKILL at the deadline.
  void terminate(const std::string& why);
  // A folder for the trace dumps, with no dump (nor launcher record) of an earlier job in it:
  // those go to <trace_dir>/previous_job/, said in one line (which files: its comment); and
  // no timeline left from an earlier job.
  void prepare_trace_files();
  // With a trace folder: <trace_dir>/launcher_node<N>.json, what this launcher saw of its ranks
  // (docs/failures.md): each process's pid and how it ended, the first failure, the run id.
  void write_launcher_record();
  // Which running ranks are stopped by job control (stops_), at most every
  // RankStops::kInterval unless now_anyway.
  void look_for_stopped_ranks(bool now_anyway);
  void kill_stragglers();
  // The job was stopped by a signal to the launcher (result_.interrupted_by): says so in one
  // line, with the ranks that got it from outside too (attempt_outside_stop.cc).
  void say_stopped_from_outside();
  // As the launcher's signal `sig` begins the stop, with several machines: leaves on the
  // job's board that this machine's launcher was stopped from outside (no rank failed), and
  // marks its ranks as stopped by it, so that the other machines' ranks and launchers name
  // no rank of this machine as their culprit (attempt_outside_stop.cc).
  void publish_outside_stop(int sig);
  // The launcher's own stopping signal `sig`, before any stop: the job is interrupted and
  // the stop begins; its last line names who sent it (attempt_outside_stop.cc).
  void begin_outside_stop(int sig);
  // The launcher's SIGTERM came while it stopped the ranks for a first failure: when that
  // rank exited with a code (no signal, no error file) within kOutsideStopHold before it,
  // its handler caught the same signal from outside (a scheduler's stop of the whole job,
  // a graceful checkpoint-and-exit): the job is interrupted, not failed, and no impatience
  // SIGKILL follows. True when so (attempt_outside_stop.cc).
  bool outside_stop_after_failure(int sig);
  // Another machine's launcher, while its ranks run: node 0's launcher left the job's
  // stop (roll call's job_stop), or was taken for lost: stops the ranks as if its own signal
  // had come, saying why. Node 0's launcher left as its farewell said (node0_left): says so
  // once, and the ranks run on (attempt_job_stop.cc).
  void handle_stop_elsewhere();
  // Node 0's launcher, stopped by `sig` while it waited for the other machines' ranks
  // (close_roll_call): leaves the job's stop on the board and waits, a few seconds at most,
  // for the other launchers to read it. Returns the head of the last line ("told the other
  // machines' launchers to stop their ranks[, but not all had read it ...]"), or "" when
  // nothing was told (no board; the board refused, said here) (attempt_job_stop.cc).
  std::string tell_others_of_stop(int sig, NodeRollCall* roll_call);
  // Node 0's launcher, after `sig` ended its wait for the other machines' ranks: says why
  // at once, tells the others (tell_others_of_stop), then ends with a line naming, as read
  // after the telling, each other machine ("node 1 read it (...); node 2 had ended: ...")
  // and the exit status (attempt_job_stop.cc).
  void end_wait_on_stop(int sig, NodeRollCall* roll_call);
  // After every rank has ended: the rank that failed first by time (its error file's time,
  // else when its exit was seen) becomes the job's failure, and is named once more if the
  // ranks' own reports change or add to what was said when the first failure was seen.
  void name_first_failure();
  // A folder for the ranks' error files (DISTCOMM_ERROR_FILE), removed by remove_error_files.
  void make_error_dir();
  void remove_error_files();
  bool reap_leftovers();
  int poll_timeout_ms() const;

  const LaunchOptions options_;
  OutputRouter router_;
  OutputPump pump_;
  SignalWatch& signals_;
  const AttemptWatch* watch_;
  JobStore* store_ = nullptr;  // the store this launcher serves, if it does
  std::string doomed_;               // why that store says the job cannot run, once it did
  std::map<size_t, std::string> fenced_;  // by process: why its group fenced it, once killed for it
  std::map<size_t, std::string> refused_;  // by process: why its job's members refused it
  std::set<size_t> asked_refusal_;         // the processes the store answered about (ask_refusals)
  std::string job_stopped_;                // why the job's members stopped it, once the store said so
  std::string error_dir_;
  std::vector<RankProcess> processes_;  // processes_[i] is ranks_[i]
  local::LocalRanks ranks_;
  JobResult result_;
  DumpRequest dumps_;
  // The dumps asked for on SIGUSR1 (ask_for_dumps_on_request): awaited only to say when they
  // are written; the job runs on.
  DumpRequest requested_dumps_;
  std::string stop_reason_;  // why, while the dumps are awaited
  // What stops the ranks: SIGTERM, or the signal that stopped this launcher, passed on as
  // torchrun's agent does (a Ctrl-C reaches the ranks as SIGINT: they lead process groups
  // of their own, which the terminal's SIGINT does not reach).
  int stop_signal_ = SIGTERM;
  struct Replacement {
    Clock::time_point due;
    int local_rank;
    int number;  // the n-th replacement of its rank
  };
  std::vector<Replacement> replacements_;  // due, not yet started
  RankStops stops_;  // the ranks seen stopped by job control, for the record
  // A first failure by a stopping signal the launcher did not send waits for its own
  // (outside_stop.h): a scheduler's stop of the whole job, not a failed rank.
  OutsideStopHold outside_hold_;
  // The job's store as the machines' launchers share it (several machines, under
  // tools/launch), else null: each machine's first failure, and the ranks stopped for it.
  std::unique_ptr<JobFailureBoard> board_;
  bool failure_published_ = false;  // this machine's first failure is on board_
  NodeRollCall* roll_call_ = nullptr;  // this attempt's (node_roll_call.h), while run() holds it
  std::string stopped_elsewhere_;      // node 0's words, once its job's stop stopped these ranks
  bool node0_lost_ = false;            // those words are this launcher's: node 0 taken for lost
  bool said_node0_left_ = false;       // node 0's farewell was said (handle_stop_elsewhere)
  int64_t outside_signal_ns_ = 0;      // when this launcher took its own stopping signal
  Clock::time_point all_stopped_since_{};  // handle_stopped_leftovers(): when it began, or {}
  std::vector<int> replaced_;              // by local rank: replacements started so far
};

}  // namespace internal
}  // namespace launch
}  // namespace distcomm
