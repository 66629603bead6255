// The launchers of an elastic job agree, through one store (the rendezvous store, served
// by the launcher on the endpoint's host), on who is in each round, each one's node rank,
// the ranks' world size, identity and store, and how many restarts the job has had.
//
// Keys (the store belongs to this job alone: its run id is "rdzv-<rdzv_id>"):
//   settings           "<min>:<max>:<max_restarts>" of the first launcher; the others must match
//   hb/<id>            a launcher's heartbeat, a counter it adds to every heartbeat_interval
//   gone/<id>          why that launcher is out (went away, left, interrupted)
//   current            the number of the round now forming or running (from 1)
//   round/<r>          "open|<member>;..." while launchers join, then
//                      "closed|<restarts>|<run id>|<token>|<member>;..." (compare_set only)
//   round/<r>/end      why round r ended, "<restart|membership>|<exit code>|<cause>|<why>"
//                      (first wins; round_end.h)
//   round/<r>/waiting  launchers that found round r closed without them, ';'-separated
//   round/<r>/done     launchers whose ranks all finished in round r, ';'-separated (a list,
//                      not a counter: a request the store did not answer is made again)
//   finished           the round in which the job finished
//   round/<r>/gave_up  why the launchers gave round r up (no min_nodes within --rdzv_timeout_s;
//                      first wins): every member of the open round ends with these words
//   refused/count      how many launchers agree_on_settings() refused (a counter), and
//   refused/<n>        "<who>|<why>" of the n-th: the waiting launchers say so at once
//   stopped            the job's stop (a round end, cause kJobStopped; first wins): the launcher
//                      serving the store got a stopping signal, and the store ends with it
//   stop_seen/<id>     that launcher read the job's stop (the serving one waits for these)
// A member is "<id>,<host>,<nproc>,<port>,<alive port>": where the others reach it, its
// ranks, a free port on its host for the ranks' store should it be node 0, and the port
// whose connections tell the others when its launcher ends (launcher_links.h).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "api/store/store.h"
#include "launch/elastic_options.h"
#include "launch/round_end.h"

namespace distcomm {
namespace launch {

struct Member {
  std::string id;
  std::string host;
  int nproc = 1;
  int port = 0;
  int alive_port = 0;
};

struct Round {
  int number = 0;
  int restarts = 0;  // the job's restarts before this round
  std::string run_id;
  std::string token;
  std::vector<Member> members;  // node rank = index

  int node_rank(const std::string& id) const;  // -1 if not a member
  int world_size() const;
  int first_rank(int node_rank) const;
};

// Which launchers are alive, as one observer sees their heartbeats: a launcher is gone once
// it is marked gone in the store, or its counter has not moved for heartbeat_timeout since
// this observer first saw it (so no clocks are compared across machines). An observer that
// could not look for heartbeat_timeout (the store did not answer, or the observer was
// stopped) starts counting again: a silence it did not watch is no launcher's.
class Liveness {
 public:
  explicit Liveness(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  // Reads the heartbeats and gone marks of ids; returns those newly found gone.
  std::vector<std::string> observe(Store& store, const std::vector<std::string>& ids);
  bool alive(const std::string& id) const;

 private:
  struct Seen {
    std::string beat;
    std::chrono::steady_clock::time_point changed;
    std::chrono::steady_clock::time_point looked;  // the last read of its heartbeat
    bool gone = false;
  };
  std::chrono::milliseconds timeout_;
  std::map<std::string, Seen> seen_;
};

// Thrown by Rendezvous::join when the open round did not gather min_nodes within
// --rdzv_timeout_s. The first member to time out writes why in the store (round/<r>/gave_up)
// and every member of that round ends with those same words, at once, rather than each at
// its own deadline (the launcher serving the store ended first, and the others lost it).
// `others`: the round's other live members, whom the launcher serving the store waits for
// (their gone marks) before it ends, so that they read the words.
class RendezvousGaveUp : public std::runtime_error {
 public:
  RendezvousGaveUp(const std::string& why, std::vector<std::string> others)
      : std::runtime_error(why), others(std::move(others)) {}
  std::vector<std::string> others;
};

// Thrown by Rendezvous::join when the job was stopped (Rendezvous::stop_job: the launcher
// serving the store got a stopping signal) while this launcher waited for a round: no round
// can form without the store. `stop` is the stop as written.
class JobStopped : public std::runtime_error {
 public:
  explicit JobStopped(const RoundEnd& stop) : std::runtime_error(stop.why), stop(stop) {}
  RoundEnd stop;
};

// How often a launcher waiting for machines says so: every 30 s, or a quarter of a shorter
// --rdzv_timeout_s (1 s at least), so that a wait is never silent for long.
std::chrono::milliseconds progress_interval(const ElasticOptions& options);

class Rendezvous {
 public:
  // `say`: where join() writes its lines (a refused launcher, waiting progress); may be null.
  Rendezvous(Store& store, const ElasticOptions& options, int max_restarts,
             std::function<void(const std::string&)> say = nullptr);

  // The first launcher's settings become the job's; throws std::invalid_argument naming
  // the flag where this launcher's differ, after writing its refusal in the store
  // (refused/<n>) so that the launchers waiting for machines say at once that one was
  // refused and why, instead of waiting silently for --rdzv_timeout_s.
  void agree_on_settings();
  // Joins the next round that closes with this launcher in it, or returns nothing when
  // `interrupted` says so (asked at every poll) or the job finished without it. While the
  // round it is in has fewer than min_nodes, it says every progress_interval() how many
  // came and which launchers were refused, and says each refusal as it comes (it waits on:
  // a launcher given the job's flags may still come, as torchrun's rendezvous waits out its
  // timeout for min_nodes). Throws RendezvousGaveUp when the round it is in does not gather
  // min_nodes within options.timeout (or another member gave it up), std::runtime_error
  // when it waited outside a running round that long, JobStopped when the job was stopped.
  std::optional<Round> join(const Member& self, Liveness& liveness, const std::function<bool()>& interrupted);

  std::optional<RoundEnd> end_of(int round);
  // Ends the round unless it already ended; returns the end that stands (the first).
  RoundEnd end(int round, const RoundEnd& end);
  std::vector<std::string> waiting(int round);
  void mark_gone(const std::string& id, const std::string& why);
  std::optional<std::string> gone(const std::string& id);
  // This launcher's ranks all finished in round r; how many launchers' have.
  void mark_done(int round, const std::string& id);
  int64_t done_count(int round);
  void mark_finished(int round);
  bool finished();
  // The job's stop (job_stop_end), first wins: returns the stop that stands. The round now
  // running, if any, ends with it too (its members' watches stop their ranks).
  RoundEnd stop_job(const RoundEnd& stop);
  std::optional<RoundEnd> job_stop();
  void mark_stop_seen(const std::string& id);
  bool stop_seen(const std::string& id);
  // The other launchers join() last saw: the live members of the round it was forming, the
  // last round's that had not come back yet, or the members of the round running without
  // it. Those a launcher leaving while it waited tells of the job's stop.
  const std::vector<std::string>& others_seen() const { return others_seen_; }

 private:
  std::optional<std::string> read(const std::string& key);
  int current_round();
  void next_round_after(int round);
  void append(const std::string& key, const std::string& item);
  // Refusals written since the last call ("<who> (<why>)"), oldest first.
  std::vector<std::string> new_refusals();
  void say(const std::string& line) const {
    if (say_) say_(line);
  }

  Store& store_;
  const ElasticOptions options_;
  const int max_restarts_;
  const std::function<void(const std::string&)> say_;
  int64_t refusals_seen_ = 0;
  std::vector<std::string> others_seen_;
};

// "a.b.c.d" of the member list, for messages: "2 machines".
std::string machines_text(size_t n);

}  // namespace launch
}  // namespace distcomm
