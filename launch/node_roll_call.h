// How the other machines of a static job across machines (--nnodes > 1) ended: each
// launcher but node 0's beats in the job's store (node 0's launcher serves it) while its
// ranks run and says there how they ended; node 0's launcher watches the beats. Only when
// every other machine's launcher said its ranks exited 0 does node 0's say the job
// succeeded (job_outcome.h); otherwise its last line names the machines whose ranks failed,
// still ran when it stopped waiting, or were lost: a launcher that went silent without
// saying how its ranks ended (SIGKILL, a power cut, a network cut). A fault-tolerant job
// (--on_failure=continue) goes on without a machine lost and may succeed: node 0's last
// line then names the machine lost, which otherwise only the ranks' own lines told.
//
// This library does not link the core: the store client is //launch:tcp_node_roll_call's,
// which sets node_roll_call_opener() as it is loaded (tools/launch links it). Without it (the
// self-launching examples, whose jobs are one machine's) there is no roll call.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/job_failure_board.h"

namespace distcomm {
namespace launch {

// A launcher whose beat has not advanced for this long, while it had not said its ranks
// ended, is taken for lost. Beats come every kRollCallBeat.
constexpr std::chrono::milliseconds kRollCallBeat{1000};
constexpr std::chrono::milliseconds kRollCallSilence{5000};
// Node 0's farewell (NodeRollCall::leave) is left this long before its wait for the other
// machines' ranks ends, and its store stays until then: every other launcher's next beat
// reads it (two beats, and a margin for a loaded machine). Within --other_machines_wait_s,
// whose one bound the wait and the store's farewell share; a shorter wait leaves it at once.
constexpr std::chrono::milliseconds kNode0FarewellReach{2500};

// How another machine's launcher said its ranks ended (NodeRollCall::ended): node 0's
// launcher tells a clean end from a failure by this text.
constexpr char kRanksExitedZero[] = "its ranks exited 0";
constexpr char kRanksFailed[] = "its ranks failed";

// Another machine, as node 0's launcher last saw it.
struct OtherMachine {
  enum class State {
    kExitedZero,  // its launcher said its ranks exited 0
    kFailed,      // its launcher said anything else (kRanksFailed)
    kRunning,     // it still beats, and has not said how its ranks ended
    kLost,        // silent for kRollCallSilence without having said how its ranks ended
  };
  int node_rank = -1;
  State state = State::kRunning;
  std::string who;  // what its launcher said of itself: "ranks 2-3 on host-b, launcher pid 7"
  bool checked_in = false;  // whether node 0's launcher saw it at all (its who, or a beat)
  bool stop_seen = false;   // its launcher read the job's stop (NodeRollCall::job_stop)
  // How long after node 0's roll call began (about when the job began) its last beat came.
  std::chrono::steady_clock::duration last_seen{};
};

class NodeRollCall {
 public:
  virtual ~NodeRollCall() = default;
  // Another machine's launcher, as its attempt ends: how its ranks ended (kRanksExitedZero
  // or kRanksFailed); its beats stop. Best-effort, bounded, never throws.
  virtual void ended(const std::string& how) = 0;
  // Node 0's launcher: whether every other machine's launcher has said how its ranks ended
  // or has gone silent. Answers at once (the watch looks each kRollCallBeat); the caller
  // waits, polling its signals meanwhile (attempt.cc). Never throws.
  virtual bool settled() = 0;
  // Node 0's launcher: every other machine as seen last, by node. Never throws.
  virtual std::vector<OtherMachine> others() = 0;
  // Another machine's launcher: the job's stop node 0's launcher left in its store
  // (JobFailureBoard::publish_job_stop: a stopping signal reached it while it waited for
  // the other machines' ranks), its signal and words, once a beat read it (a beat then
  // says it was read); nullopt before. Or, where node 0's store answered none of this
  // launcher's beats for kRollCallSilence and no beat had read node 0's farewell
  // (node0_left: node 0's launcher ended, maybe with a stop this launcher missed while
  // SIGSTOPped; or node 0 was lost), SIGTERM and words saying so:
  // "node 0's launcher ended or was lost: its store at host:port has not answered this
  // launcher's beats for 6.0 s (<the last beat's error>)" (node0_lost()). Either way nobody
  // else stops this machine's ranks. Answers at once (the main loop asks each turn).
  virtual std::optional<std::pair<int, std::string>> job_stop() { return std::nullopt; }
  // Whether job_stop() is this launcher's own conclusion that node 0's launcher is gone,
  // not node 0's word.
  virtual bool node0_lost() { return false; }
  // Node 0's launcher, whose ranks exited 0, near the end of its wait for the other
  // machines' ranks (kNode0FarewellReach before it, attempt.cc): leaves `words` ("node 0's
  // launcher stopped waiting for the other machines' ranks 30 s after its own exited 0") in
  // its store for the other launchers to read at their next beat. Its leaving is then on
  // purpose, not a loss: theirs watch their ranks on (node0_left). One request, bounded;
  // false when its store was not reached. Never throws.
  virtual bool leave(const std::string& words) {
    (void)words;
    return false;
  }
  // Another machine's launcher: node 0's farewell words, once a beat read them and a later
  // beat found node 0's store gone (it left as it said); nullopt before, and for good where
  // a beat read the job's stop first. Its beats end then, and job_stop() never takes node
  // 0 for lost: this launcher watches its ranks to their end and reports it, as torchrun's
  // agents let their workers finish. Answers at once.
  virtual std::optional<std::string> node0_left() { return std::nullopt; }
  // Node 0's launcher, after leaving the job's stop: whether each other machine's launcher
  // has read it, said how its ranks ended, or gone silent. Answers at once.
  virtual bool stop_known_by_all() { return true; }
};

// Opens the roll call of node `node_rank` of `nnodes` in the job's store at `address`, for
// attempt `attempt` (LaunchOptions::restart_count: its keys are the attempt's own, so that a
// slow launcher's word from an attempt before is never read in the next); `who` is what
// this launcher says of itself. The beating (another node) or watching (node 0) begins at
// once, in a thread of its own, and ends as the result is destroyed.
using NodeRollCallOpener = std::function<std::unique_ptr<NodeRollCall>(
    const JobStoreAddress& address, int nnodes, int node_rank, int attempt, const std::string& who)>;

// Set once by //launch:tcp_node_roll_call as it is loaded; empty without it.
NodeRollCallOpener& node_roll_call_opener();

// What node 0's last line says of another machine that did not end clean:
//   "node 1 (ranks 2-3 on host-b, launcher pid 7) was lost: its launcher went silent without
//    saying that its ranks ended, last seen 4.1 s into the job"
//   "node 1's ranks failed (ranks 2-3 on host-b, launcher pid 7)"
//   "node 1's ranks were still running when this launcher stopped waiting for them (ranks 2-3 on ...)"
//   "node 1's launcher had not checked in when this launcher stopped waiting for it"
std::string other_machine_text(const OtherMachine& m);

}  // namespace launch
}  // namespace distcomm
