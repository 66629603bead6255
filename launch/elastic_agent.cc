#include "launch/elastic_agent.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "api/process/job_identity.h"
#include "api/process/local_processes.h"
#include "api/process/write_fully.h"
#include "launch/heartbeat.h"
#include "launch/job.h"
#include "launch/job_outcome.h"
#include "launch/launcher_links.h"
#include "launch/outside_stop.h"
#include "launch/rendezvous.h"
#include "launch/rendezvous_endpoint.h"
#include "launch/round_watch.h"
#include "launch/signal_watch.h"
#include "launch/duration_text.h"

namespace distcomm {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

// While the ranks of every member finish: how often to look at the store.
constexpr std::chrono::milliseconds kBarrierPoll{100};
// The launcher serving the store stays this long at most for the others to see how the job ended.
constexpr std::chrono::seconds kServeAfterDone{10};
// How long the launcher serving the store keeps it, once a stopping signal made it stop the
// job, for the others to read the stop (as node 0's launcher of a static job keeps its own:
// attempt_job_stop.cc). The others read it as their watch sees the round end (each 0.2 s)
// or at their next poll of the rendezvous (each 50 ms): room for a loaded machine.
constexpr std::chrono::milliseconds kJobStopReach{5000};
constexpr std::chrono::milliseconds kJobStopLook{100};
// A stopping signal this soon after the one that stopped the job is a repeat of it.
constexpr std::chrono::milliseconds kRepeatedStop{1000};

// How a stopping signal reached a launcher, for the job stop's words.
std::string how_it_came(int sig, bool terminal) {
  if (!terminal) return local::signal_name(sig);
  if (sig == SIGINT) return "SIGINT (a Ctrl-C there)";
  if (sig == SIGQUIT) return "SIGQUIT (a Ctrl-\\ there)";
  return local::signal_name(sig) + " from its terminal";
}

// The words of the job's stop, which every other launcher ends with: "the job was stopped at
// node 0's terminal (10.0.0.1), which served the job's store: ...". `node`: "node 0" in a
// round, "" outside one (then the address alone names the machine).
std::string job_stop_words(int sig, bool terminal, const std::string& node, const std::string& address) {
  std::string where;
  if (terminal) {
    where = node.empty() ? "at the terminal of " + address : "at " + node + "'s terminal (" + address + ")";
  } else {
    where = node.empty() ? "on " + address : "on " + node + " (" + address + ")";
  }
  return "the job was stopped " + where + ", which served the job's store: its launcher got " +
         how_it_came(sig, terminal) + ", and the rendezvous store ends with it";
}

// "<host>-<pid>-<random>": unique among the launchers of a job, readable in messages.
std::string new_launcher_id() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  std::string name;
  for (const char* c = host; *c; ++c) name.push_back(std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_');
  return name + "-" + std::to_string(::getpid()) + "-" + hex_of(random_bytes(3));
}

class Agent {
 public:
  Agent(const LaunchOptions& options, const ElasticOptions& elastic) : options_(options), elastic_(elastic) {}
  JobResult run();

 private:
  void say(const std::string& m) const { write_fully(2, options_.tag + ": " + m + "\n"); }
  std::string rendezvous_name() const { return "rendezvous '" + elastic_.rdzv_id + "'"; }
  // SIGINT/SIGTERM/SIGHUP/SIGQUIT since the last look (0: none).
  bool interrupted();
  LaunchOptions round_options(const Round& round) const;
  // After this machine's ranks finished: until every member's have (true), or the round
  // ends (false: join the next).
  bool wait_for_the_others(const Round& round, RoundWatch& watch);
  JobResult leave(int exit_code, const std::string& why);
  // leave() after a signal, with a last line saying so unless the attempt said it already
  // (its "got SIGTERM: stopping 1 rank"): the store's silence, when that is what the
  // launcher last met, or nothing else, as a 130 alone told a user nothing.
  JobResult leave_interrupted(bool said);
  // The launcher serving the store stays until the others of the last round have left too
  // (they read the store until then), or kServeAfterDone.
  void linger_while_others_read();
  // The end a stopping signal (`sig`) leaves for `round`: the launcher serving the store
  // cannot leave the job alone (the store ends with it), so it stops the job
  // (Rendezvous::stop_job, which ends the round too); any other one ends the round. Throws
  // what the store throws.
  void end_on_signal(const Round& round, int sig);
  // The launcher serving the store, interrupted while it waited for a round: stops the job
  // when other launchers may still use the store (those join() saw, and the last round's
  // not marked gone), and leaves after telling them; nullopt when there are none.
  std::optional<JobResult> stop_the_job_outside_a_round();
  // The launcher serving the store, once it stopped the job: keeps the store until each
  // other launcher (id, name) read the stop, left, or ended -- kJobStopReach at most, or a
  // second stopping signal -- then its last line says why the whole job stopped and how to
  // remove machines on purpose instead, and it leaves. Alone, it leaves as any launcher
  // does (leave_interrupted(said)): there is nobody to tell.
  // `before`: what the launcher was doing when the signal came, said first on that line
  // ("this machine's rank 0 had exited 0 and ..."); "" for nothing to add.
  JobResult leave_after_stopping_the_job(const std::vector<std::pair<std::string, std::string>>& others, bool said,
                                         const std::string& before = "");
  // The others of `round`, by id and as the last line names them ("node 2").
  std::vector<std::pair<std::string, std::string>> others_of(const Round& round) const;
  // Another launcher: the job was stopped (`stop`, read in the store); it ends with one line
  // naming that stop, exit 128 + its signal. `after`: what of the rendezvous ends with it.
  JobResult end_by_job_stop(const RoundEnd& stop, const std::string& after);
  // The job's stop, read at once as the round watch stops the ranks (the store may be gone
  // by the time they are stopped); a request tried once.
  void read_job_stop_now();
  // After another machine's launcher left by a signal that may be the whole job's: waits up
  // to `hold` for a stopping signal of this launcher's own (returned) or, on a launcher that
  // does not serve the store, for the job's stop (job_stop_read_ then; 0 returned), whichever
  // comes first; 0 when neither came.
  int own_stop_within(std::chrono::milliseconds hold);
  // The round was given up (RendezvousGaveUp): marks this launcher gone and, serving the
  // store, waits until `others` are marked gone too (they have read why), or kServeAfterDone.
  void leave_after_giving_up(const std::vector<std::string>& others);
  JobResult run_rounds();

  const LaunchOptions options_;
  const ElasticOptions elastic_;
  SignalWatch signals_;
  int interrupted_by_ = 0;
  // Whether `sig` came from this machine's terminal (a Ctrl-C: signal_watch.h).
  bool at_terminal(int sig) const {
    const std::optional<SignalSender> s = signals_.sender_of(sig);
    return s && from_terminal(*s);
  }
  bool in_attempt_ = false;  // run_attempt() takes the signals meanwhile
  bool in_on_stop_ = false;
  std::unique_ptr<RendezvousEndpoint> endpoint_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Rendezvous> rendezvous_;
  std::string id_;
  std::string address_;  // where the others reach this launcher
  bool stopped_the_job_ = false;           // this launcher wrote the job's stop
  std::optional<RoundEnd> job_stop_read_;  // another launcher's stop, read as the ranks stopped
  LauncherLinks links_;
  std::optional<Round> last_round_;
  const Clock::time_point began_ = Clock::now();
  // The rounds that ended before the last one, oldest first: "rendezvous 'job7' round 1
  // ended 4.1 s into the job: the launcher of node 1 (host-b) ended".
  std::vector<std::string> survived_;
};

bool Agent::interrupted() {
  for (int sig : signals_.take()) {
    if (interrupted_by_ == 0 && stops_the_job(sig)) interrupted_by_ = sig;
  }
  return interrupted_by_ != 0;
}

LaunchOptions Agent::round_options(const Round& round) const {
  LaunchOptions o = attempt_options(options_, round.number - 1);
  const int node = round.node_rank(id_);
  o.nnodes = static_cast<int>(round.members.size());
  o.node_rank = node;
  o.first_rank = round.first_rank(node);
  o.total_ranks = round.world_size();
  o.master_addr = round.members[0].host;
  o.master_port = round.members[0].port;
  o.identity = {round.run_id, round.token};
  o.restart_count = round.restarts;
  o.rdzv_id = elastic_.rdzv_id;
  // Rank 0 serves each round's store: the launchers do not (yet) serve it in elastic jobs.
  o.serve_store = nullptr;
  return o;
}

JobResult Agent::leave(int exit_code, const std::string& why) {
  JobResult r;
  r.exit_code = exit_code;
  r.interrupted_by = interrupted_by_;
  // Interrupted, the launcher does not wait for a store that does not answer: a request
  // is tried once (3 s at most), none when the store was silent last.
  if (interrupted_by_ != 0 && endpoint_) endpoint_->give_up_retrying();
  // So that the others need not wait out this launcher's heartbeat.
  if (rendezvous_) {
    try {
      rendezvous_->mark_gone(id_, why);
      if (interrupted_by_ == 0) linger_while_others_read();
    } catch (const std::exception&) {
      // The store is gone as well: nobody is left to tell.
    }
  }
  return r;
}

JobResult Agent::leave_interrupted(bool said) {
  const std::string sig = local::signal_name(interrupted_by_);
  JobResult r = leave(128 + interrupted_by_, "interrupted (" + sig + ")");
  if (endpoint_ && endpoint_->silent()) {
    say("got " + sig + " while the rendezvous store did not answer: leaving");
  } else if (!said) {
    say("got " + sig + ": leaving");
  }
  return r;
}

void Agent::linger_while_others_read() {
  if (!endpoint_->serving() || !last_round_) return;
  const auto deadline = Clock::now() + kServeAfterDone;
  for (const Member& m : last_round_->members) {
    while (m.id != id_ && !rendezvous_->gone(m.id) && links_.ended({m.id}, 0).empty() && Clock::now() < deadline &&
           !interrupted()) {
      std::this_thread::sleep_for(kBarrierPoll);
    }
  }
}

void Agent::leave_after_giving_up(const std::vector<std::string>& others) {
  try {
    rendezvous_->mark_gone(id_, "gave the rendezvous up");
    if (!endpoint_->serving()) return;
    const auto deadline = Clock::now() + kServeAfterDone;
    for (const std::string& id : others) {
      while (!rendezvous_->gone(id) && Clock::now() < deadline && !interrupted()) {
        std::this_thread::sleep_for(kBarrierPoll);
      }
    }
  } catch (const std::exception&) {
    // The store is gone: nobody is left to tell.
  }
}

int Agent::own_stop_within(std::chrono::milliseconds hold) {
  const Clock::time_point until = Clock::now() + hold;
  while (true) {
    // The store's requests take the signals too (their give-up asks interrupted()): a signal
    // they took is in interrupted_by_, so this asks there rather than the watch alone.
    if (interrupted()) return interrupted_by_;
    // The launcher serving the store was stopped meanwhile (a Ctrl-C there during its own
    // hold): the store ends with it, so this one ends now, by that stop, rather than after
    // the hold with a restart or a give-up that blamed the machine that left.
    if (!endpoint_->serving()) {
      job_stop_read_ = rendezvous_->job_stop();
      if (job_stop_read_) return 0;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) return interrupted() ? interrupted_by_ : 0;
    pollfd p{signals_.fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min(left, kJobStopLook).count()));
  }
}

void Agent::end_on_signal(const Round& round, int sig) {
  const bool terminal = at_terminal(sig);
  const std::string node = "node " + std::to_string(round.node_rank(id_));
  if (endpoint_->serving()) {
    rendezvous_->stop_job(job_stop_end(job_stop_words(sig, terminal, node, address_), sig, terminal));
    stopped_the_job_ = true;
    return;
  }
  // 1 for the others, who were not interrupted (128 + the signal is this node's own exit
  // code: a script reading 130 on another machine would take it for a Ctrl-C there).
  rendezvous_->end(round.number, interrupted_end(node + " (" + address_ + ") left: interrupted (" +
                                                     local::signal_name(sig) + ")",
                                                 sig, terminal));
}

std::optional<JobResult> Agent::stop_the_job_outside_a_round() {
  const int sig = interrupted_by_;
  std::vector<std::pair<std::string, std::string>> others;
  try {
    std::vector<std::string> ids = rendezvous_->others_seen();
    if (last_round_) {
      for (const Member& m : last_round_->members) ids.push_back(m.id);
    }
    for (const std::string& id : ids) {
      const bool listed = std::any_of(others.begin(), others.end(), [&](const auto& o) { return o.first == id; });
      if (id == id_ || listed || rendezvous_->gone(id)) continue;
      // As the last round named it, the names its user saw; a launcher that joined since
      // (waiting for a round) has no other name than its id.
      const int node = last_round_ ? last_round_->node_rank(id) : -1;
      others.emplace_back(id, node < 0 ? "the launcher " + id
                                       : "node " + std::to_string(node) + " (" +
                                             last_round_->members[static_cast<size_t>(node)].host + ")");
    }
    if (others.empty()) return std::nullopt;
    const bool terminal = at_terminal(sig);
    rendezvous_->stop_job(job_stop_end(job_stop_words(sig, terminal, "", address_), sig, terminal));
    stopped_the_job_ = true;
  } catch (const std::exception&) {
    return std::nullopt;  // the store's own launcher cannot reach it: nobody can be told
  }
  endpoint_->give_up_retrying();
  return leave_after_stopping_the_job(others, /*said=*/false);
}

std::vector<std::pair<std::string, std::string>> Agent::others_of(const Round& round) const {
  std::vector<std::pair<std::string, std::string>> others;
  for (size_t i = 0; i < round.members.size(); ++i) {
    if (round.members[i].id != id_) others.emplace_back(round.members[i].id, "node " + std::to_string(i));
  }
  return others;
}

JobResult Agent::leave_after_stopping_the_job(const std::vector<std::pair<std::string, std::string>>& others,
                                              bool said, const std::string& before) {
  if (others.empty()) return leave_interrupted(said);
  const int sig = interrupted_by_;
  const bool terminal = at_terminal(sig);
  // Each other launcher: whether it is told (read the stop), gone (and why), or ended.
  auto state_of = [&](const std::string& id) -> std::string {
    try {
      if (rendezvous_->stop_seen(id)) return "read it";
      if (std::optional<std::string> why = rendezvous_->gone(id)) return "had left (" + *why + ")";
    } catch (const std::exception&) {
      return "could not be asked (" + local::describe_current_exception() + ")";
    }
    if (!links_.ended({id}, 0).empty()) return "had ended";
    return "";
  };
  const Clock::time_point began = Clock::now();
  const Clock::time_point until = began + kJobStopReach;
  int again = 0;  // a second stopping signal, a deliberate one: no more waiting
  for (const auto& other : others) {
    while (again == 0 && state_of(other.first).empty() && Clock::now() < until) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
      pollfd p{signals_.fd(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min(left, kJobStopLook).count()));
      for (int s : signals_.take()) {
        // A repeat within a second is the same stop delivered twice (a double Ctrl-C).
        if (stops_the_job(s) && Clock::now() - began >= kRepeatedStop) again = s;
      }
    }
  }
  // Read after the wait: each as it was then.
  std::string told;
  for (const auto& other : others) {
    const std::string state = state_of(other.first);
    told += (told.empty() ? ": " : "; ") + other.second + " " +
            (!state.empty() ? state
                            : "had not read it " + (again != 0 ? "when " + local::signal_name(again) + " came"
                                                               : "within " + seconds_text(kJobStopReach)));
  }
  const std::string stopper =
      terminal ? (sig == SIGQUIT ? "a Ctrl-\\ here" : sig == SIGINT ? "a Ctrl-C here" : how_it_came(sig, true))
               : "its " + local::signal_name(sig);
  say((before.empty() ? "this machine's launcher serves" : before + "; it serves") +
      " the job's rendezvous store (--rdzv_endpoint=" + elastic_.endpoint_host + ":" +
      std::to_string(elastic_.endpoint_port) + "), so " + stopper + " stops the job on every machine: " +
      "told the other machines' launchers" + told +
      // A Ctrl-C is a user removing a machine, who is told how (a signal sent with kill may
      // be the whole job's anyway: a scheduler's).
      (terminal ? "; to remove machines on purpose, serve the store from a machine that stays (every launcher's "
                  "--rdzv_endpoint pointing at it) and press Ctrl-C at the terminals of those that leave"
                : "") +
      "; exit status " + std::to_string(128 + sig) + " (128 + " + std::to_string(sig) + ")");
  return leave(128 + sig, "stopped the job (" + local::signal_name(sig) + ")");
}

JobResult Agent::end_by_job_stop(const RoundEnd& stop, const std::string& after) {
  try {
    rendezvous_->mark_stop_seen(id_);
  } catch (const std::exception&) {
    // Read already (read_job_stop_now), or the store is gone: it cannot be told now.
  }
  // The store ends with its launcher: no request of this one waits for it any more.
  endpoint_->give_up_retrying();
  say(stop.why + "; " + after + "; exit status " + std::to_string(stop.exit_code) + " (128 + " +
      std::to_string(stop.signal) + ")");
  JobResult r = leave(stop.exit_code, "the job was stopped");
  r.interrupted_by = stop.signal;
  return r;
}

void Agent::read_job_stop_now() {
  if (endpoint_->serving() || job_stop_read_) return;
  try {
    std::unique_ptr<Store> once = endpoint_->connect_again([] { return true; });
    Rendezvous rendezvous(*once, elastic_, options_.max_restarts);
    if (std::optional<RoundEnd> stop = rendezvous.job_stop()) {
      rendezvous.mark_stop_seen(id_);
      job_stop_read_ = stop;
    }
  } catch (const std::exception&) {
    // Read again once the ranks stopped (the store may answer then).
  }
}

bool Agent::wait_for_the_others(const Round& round, RoundWatch& watch) {
  const int64_t members = static_cast<int64_t>(round.members.size());
  rendezvous_->mark_done(round.number, id_);
  while (rendezvous_->done_count(round.number) < members) {
    if (interrupted()) return false;
    if (!watch.check().empty()) return false;
    std::this_thread::sleep_for(kBarrierPoll);
  }
  rendezvous_->mark_finished(round.number);
  return true;
}

JobResult Agent::run() {
  try {
    return run_rounds();
  } catch (const JobStopped& e) {
    // Stopped while this launcher waited for a round: no round forms without the store.
    return end_by_job_stop(e.stop, rendezvous_name() + ": no new round");
  } catch (const RendezvousGaveUp& e) {
    // Every member of the round ends with the same words (main says them): the launcher
    // serving the store keeps it until the others have read them.
    leave_after_giving_up(e.others);
    throw;
  } catch (const StoreSilent& e) {
    if (interrupted_by_ != 0) {
      say("got " + local::signal_name(interrupted_by_) + " while the rendezvous store did not answer: leaving");
      return leave(128 + interrupted_by_, "interrupted (" + local::signal_name(interrupted_by_) + ")");
    }
    // A store error outside a round (the watch reports those within one): no answer for
    // --rdzv_timeout_s (a network cut, a stopped store process).
    say("lost the rendezvous store: " + std::string(e.what()));
    return leave(1, "lost the store");
  } catch (const StoreRefused& e) {
    // Answered, and refused: the endpoint is served by another job's store now (the job's
    // store launcher ended and another job took the port), or the token changed.
    say("lost the rendezvous store: the endpoint " + elastic_.endpoint_host + ":" +
        std::to_string(elastic_.endpoint_port) + " now refuses this launcher: " + e.what() +
        elastic_refusal_advice(e.what(), elastic_));
    return leave(1, "lost the store");
  } catch (const Error& e) {
    if (interrupted_by_ != 0) {
      // Interrupted while its requests waited for a store that did not answer.
      say("got " + local::signal_name(interrupted_by_) + " while the rendezvous store did not answer: leaving");
      return leave(128 + interrupted_by_, "interrupted (" + local::signal_name(interrupted_by_) + ")");
    }
    // A store error outside a round (the watch reports those within one): nothing listens
    // at the endpoint any more (the endpoint's clients wait out a store that only does not
    // answer): the launcher serving the store has ended.
    say("lost the rendezvous store at " + elastic_.endpoint_host + ":" + std::to_string(elastic_.endpoint_port) +
        " (its launcher ended?): " + e.what());
    return leave(1, "lost the store");
  }
}

JobResult Agent::run_rounds() {
  auto stop_asked = [this] { return interrupted(); };
  endpoint_ = std::make_unique<RendezvousEndpoint>(elastic_, options_.identity.token);
  // The store's requests give up waiting for a store that does not answer once the launcher
  // is interrupted; while the ranks run, the attempt takes the signals (and says so in
  // on_stop). In on_stop they are tried once: the ranks stop after it, without waiting for
  // the store.
  store_ = endpoint_->connect([this] { return in_attempt_ ? in_on_stop_ || interrupted_by_ != 0 : interrupted(); },
                              [this](const std::string& line) { say(line); });
  if (!store_) {
    say("got " + local::signal_name(interrupted_by_) + " before the rendezvous store answered: leaving");
    return leave(128 + interrupted_by_, "interrupted");
  }
  rendezvous_ = std::make_unique<Rendezvous>(*store_, elastic_, options_.max_restarts,
                                             [this](const std::string& line) { say(line); });
  rendezvous_->agree_on_settings();
  id_ = new_launcher_id();
  Heartbeat heartbeat([this] { return endpoint_->connect_again(); }, id_, elastic_.heartbeat_interval);
  // Before the heartbeat stops (its thread may be waiting for a store that does not answer):
  // every request from now on is tried once.
  struct GiveUpOnReturn {
    RendezvousEndpoint& endpoint;
    ~GiveUpOnReturn() { endpoint.give_up_retrying(); }
  } give_up_on_return{*endpoint_};
  Liveness liveness(elastic_.heartbeat_timeout);
  AlivePort alive;
  address_ = elastic_.local_addr.empty()
                 ? local_address_towards(elastic_.endpoint_host, elastic_.endpoint_port, elastic_.timeout)
                 : elastic_.local_addr;
  const std::string& address = address_;

  while (true) {
    const Member self{id_, address, options_.nproc_per_node, local::pick_free_port(), alive.port()};
    std::optional<Round> round = rendezvous_->join(self, liveness, stop_asked);
    if (!round) {
      if (interrupted_by_ != 0 && endpoint_->serving()) {
        if (std::optional<JobResult> r = stop_the_job_outside_a_round()) return *r;
      }
      if (interrupted_by_ != 0) {
        say("got " + local::signal_name(interrupted_by_) + " during the rendezvous: leaving");
        return leave(128 + interrupted_by_, "interrupted (" + local::signal_name(interrupted_by_) + ")");
      }
      say(rendezvous_name() + ": the job finished before this machine could join");
      return leave(0, "the job finished before it joined");
    }
    say(rendezvous_name() + " round " + std::to_string(round->number) + ": " + machines_text(round->members.size()) +
        " (min " + std::to_string(elastic_.min_nodes) + ", max " + std::to_string(elastic_.max_nodes) + ")");
    const int node = round->node_rank(id_);

    for (const Member& m : round->members) {
      if (m.id != id_) links_.add(m.id, m.host, m.alive_port);
    }
    last_round_ = round;
    // The watch's store gives up when the watch stops, and -- on this thread, which asks it
    // itself once the attempt is over (wait_for_the_others) and then holds the signals --
    // on a Ctrl-C: its requests would otherwise wait out a silent store (--rdzv_timeout_s).
    const std::thread::id agent_thread = std::this_thread::get_id();
    RoundWatch watch(
        [this, agent_thread](const std::function<bool()>& give_up) {
          return endpoint_->connect_again([this, agent_thread, give_up] {
            return give_up() || (std::this_thread::get_id() == agent_thread && !in_attempt_ && interrupted());
          });
        },
        elastic_, options_.max_restarts, *round, id_, links_);
    AttemptWatch attempt_watch = watch.attempt_watch();
    // The job's stop on this launcher (the store's) ends with its own last line, which gives
    // the exit status: the attempt's says how the ranks stopped, without one.
    attempt_watch.exit_status_said_after = [this, alone = round->members.size() <= 1] {
      return stopped_the_job_ && !alone;
    };
    // The round ended: if the job was stopped, read it now, while the launcher serving the
    // store keeps it for this one (it may be gone once the ranks here have stopped).
    attempt_watch.reason = [this, reason = attempt_watch.reason] {
      std::string why = reason();
      if (!why.empty()) read_job_stop_now();
      return why;
    };
    // This attempt stops by itself (a rank failed, a signal): the other machines hear of it
    // at once. When another machine's launcher has ended, that is the cause (its ranks died
    // with it, and this one failed for want of them): its link was closed before its ranks
    // were killed.
    attempt_watch.on_stop = [&](const JobResult& cause) -> std::string {
      in_on_stop_ = true;
      struct Done {
        bool& flag;
        ~Done() { flag = false; }
      } done{in_on_stop_};
      const std::string ended = watch.member_ended();
      const std::string here = "node " + std::to_string(node) + " (" + address + ")";
      try {
        if (cause.interrupted_by != 0) {
          if (interrupted_by_ == 0) interrupted_by_ = cause.interrupted_by;
          // The launcher leaves: from now on no request of its clients (the heartbeat's and
          // the watch's too) waits for a store that does not answer, and this one, which
          // the ranks' stopping waits for, is not tried at all when the store was silent last.
          endpoint_->give_up_retrying();
          end_on_signal(*round, cause.interrupted_by);
          return "";
        }
        if (!ended.empty()) {
          rendezvous_->mark_gone(ended, "its launcher ended");
          rendezvous_->end(round->number, {true, 1, "the launcher of " + watch.node_text(ended) + " ended",
                                           RoundEndCause::kLauncherEnded});
        }
        const std::string mine = "rank " + std::to_string(cause.failed_rank) + " failed (" + cause.how + ") on " + here;
        const RoundEnd e = rendezvous_->end(round->number, {true, cause.exit_code, mine, RoundEndCause::kRankFailed});
        // The round had ended already (a machine went away, or its launcher ended): this
        // rank's failure is a consequence of that.
        if (e.why != mine) return "round " + std::to_string(round->number) + " ended: " + e.why;
      } catch (const std::exception&) {
        // The watch reports a lost store.
      }
      return "";
    };
    watch.start();
    in_attempt_ = true;
    JobResult result = run_attempt(round_options(*round), signals_, &attempt_watch);
    in_attempt_ = false;
    watch.stop();

    const int sig = result.interrupted_by != 0 ? result.interrupted_by : result.signal_while_stopping;
    if (sig != 0 || interrupted()) {
      interrupted_by_ = interrupted_by_ != 0 ? interrupted_by_ : sig;
      endpoint_->give_up_retrying();
      try {
        // Written already when the signal came while the ranks ran (on_stop); not when it came later.
        end_on_signal(*round, interrupted_by_);
      } catch (const std::exception&) {
      }
      if (stopped_the_job_) return leave_after_stopping_the_job(others_of(*round), /*said=*/result.interrupted_by != 0);
      return leave_interrupted(/*said=*/result.interrupted_by != 0);
    }
    const std::string round_over =
        rendezvous_name() + " round " + std::to_string(round->number) + " ended, no new round";
    if (job_stop_read_) return end_by_job_stop(*job_stop_read_, round_over);
    if (watch.store_lost()) {
      // The watch may have lost the store in a look that outlasted the attempt, which its
      // ranks ended on their own (it then stopped nothing): its words, not the attempt's
      // (an empty "launch: " line ended such a job).
      say(watch.store_lost_why());
      return leave(1, "lost the store");
    }
    if (result.stopped_for.empty() && result.exit_code == 0 && wait_for_the_others(*round, watch)) {
      JobResult done = leave(0, "finished");
      // For the launcher's last line (job_outcome.h): this round's ranks here, and what the
      // job went on after.
      done.first_rank = result.first_rank;
      done.local_ranks = result.local_ranks;
      done.world_size = result.world_size;
      done.node_rank = result.node_rank;
      done.nnodes = result.nnodes;
      done.round = round->number;
      done.restarts = round->restarts;
      done.survived = survived_;
      return done;
    }
    if (interrupted()) {
      if (endpoint_->serving()) {
        // While this machine's ranks had finished and the others' ran: its store ends with it.
        try {
          end_on_signal(*round, interrupted_by_);
        } catch (const std::exception&) {
        }
        // What the launcher was doing, as node 0 of a static job says it (attempt_job_stop.cc):
        // its ranks' success is not the job's, which the signal stopped.
        const std::string waiting =
            result.stopped_for.empty() && result.exit_code == 0
                ? "this machine's " + rank_span_text(result.first_rank, result.local_ranks) +
                      " had exited 0 and its launcher was waiting for the other machines' ranks to end"
                : "";
        if (stopped_the_job_) return leave_after_stopping_the_job(others_of(*round), /*said=*/false, waiting);
      }
      return leave_interrupted(/*said=*/false);
    }
    if (watch.store_lost()) {
      say(watch.store_lost_why());
      return leave(1, "lost the store");
    }
    // The job was stopped (its store's launcher got a signal): no new round can form.
    if (std::optional<RoundEnd> stop = rendezvous_->job_stop()) return end_by_job_stop(*stop, round_over);
    std::optional<RoundEnd> end = rendezvous_->end_of(round->number);
    if (!end) end = RoundEnd{true, 1, result.stopped_for};  // taken for gone: the others end it
    const std::string ended = rendezvous_name() + " round " + std::to_string(round->number) + " ended: " + end->why;
    // Decided on the cause the store holds, never on the words of `why` (round_end.h).
    const AfterRoundEnd after = after_round_end(*end);
    // The job's stop is written before the round's end with it (stop_job): read above, but
    // the round's end alone says so too.
    if (after.job_stopped) return end_by_job_stop(*end, round_over);
    if (after.hold_for_own_stop.count() > 0) {
      // Another machine's launcher got SIGTERM. A scheduler stopping the whole job signals
      // this one too, moments later (outside_stop.h): no new round for it.
      if (const int sig = own_stop_within(after.hold_for_own_stop)) {
        say(ended + "; this launcher got " + local::signal_name(sig) +
            " too: the job was stopped from outside, not by a failure; no new round");
        if (endpoint_->serving()) {
          // Whatever the signal, the store ends with this launcher: it stops the job, as in
          // a round (end_on_signal); leaving alone, it left the others without a store.
          endpoint_->give_up_retrying();
          try {
            end_on_signal(*round, sig);
          } catch (const std::exception&) {
          }
          if (stopped_the_job_) return leave_after_stopping_the_job(others_of(*round), /*said=*/true);
        }
        return leave_interrupted(/*said=*/true);
      }
      if (job_stop_read_) return end_by_job_stop(*job_stop_read_, round_over);
      say(rendezvous_name() + " round " + std::to_string(round->number) + ": waited " +
          tenths_text(after.hold_for_own_stop) + " for a " +
          (end->signal != 0 ? local::signal_name(end->signal) : std::string("stopping signal")) +
          " of this launcher's own (a scheduler stopping the job signals every machine); none came");
    }
    // Last before the decision: the job's stop, written meanwhile by the launcher serving the
    // store (its store ends with it: a restart would lose it, a give-up blame another cause).
    if (!endpoint_->serving()) {
      if (std::optional<RoundEnd> stop = rendezvous_->job_stop()) return end_by_job_stop(*stop, round_over);
    }
    if (end->restart && round->restarts >= options_.max_restarts) {
      say(ended + (options_.max_restarts == 0 ? "; gave up (--max_restarts=0)"
                                              : "; gave up after " + std::to_string(round->restarts) +
                                                    (round->restarts == 1 ? " restart" : " restarts") +
                                                    " (--max_restarts=" + std::to_string(options_.max_restarts) + ")"));
      return leave(end->exit_code != 0 ? end->exit_code : 1, "gave up");
    }
    say(ended + (end->restart ? "; restart " + std::to_string(round->restarts + 1) + " of " +
                                    std::to_string(options_.max_restarts)
                              : std::string()));
    if (after.removed_on_purpose) {
      say(rendezvous_name() + " round " + std::to_string(round->number) + ": a machine was removed on purpose (its " +
          "launcher got " + local::signal_name(end->signal) + "): the next round forms without waiting");
    }
    survived_.push_back(rendezvous_name() + " round " + std::to_string(round->number) + " ended " +
                        tenths_text(Clock::now() - began_) + " into the job: " + end->why);
    if (watch.taken_for_gone() || rendezvous_->gone(id_)) {
      // The others went on without this launcher: it joins again as a new one.
      id_ = new_launcher_id();
      heartbeat.set_id(id_);
    }
  }
}

}  // namespace

void validate_elastic(const LaunchOptions& options, const ElasticOptions& elastic) {
  // The checks of a single machine's job; the machines and global ranks come with each round.
  LaunchOptions single = options;
  single.nnodes = 1;
  single.node_rank = 0;
  single.ranks_filter.clear();
  validate(single);
  if (options.node_rank != 0) {
    throw std::invalid_argument("--node_rank=" + std::to_string(options.node_rank) +
                                ": with --rdzv_endpoint the rendezvous gives each machine its node rank");
  }
  if (options.master_port != 0) {
    throw std::invalid_argument("--master_port=" + std::to_string(options.master_port) +
                                ": with --rdzv_endpoint node 0's launcher picks the ranks' store port each round");
  }
  if (options.on_failure != LaunchOptions::OnFailure::kStop) {
    throw std::invalid_argument("--on_failure=continue: with --rdzv_endpoint a failed rank ends the round on every "
                                "machine (the launchers restart it together)");
  }
  validate(elastic);
}

JobResult run_elastic_job(const LaunchOptions& options, const ElasticOptions& elastic) {
  validate_elastic(options, elastic);
  if (options.identity.token.empty()) {
    write_fully(2, options.tag + ": warning: no " + std::string(kStoreTokenVariable) +
                       ": the rendezvous store is unauthenticated; give every machine's launcher the same one in its "
                       "environment\n");
  }
  Agent agent(options, elastic);
  return agent.run();
}

}  // namespace launch
}  // namespace distcomm
