// Which machines of a static job across machines (--nnodes > 1) were lost while it ran:
// each launcher but node 0's beats in the job's store (node 0's launcher serves it) while
// its ranks run and says there how they ended; node 0's launcher watches the beats, and a
// launcher that went silent without saying how its ranks ended is a machine lost (SIGKILL,
// a power cut, a network cut). A fault-tolerant job (--on_failure=continue) goes on without
// that machine's ranks and may succeed: node 0's last line then names the machine lost, which
// otherwise only the ranks' own lines told.
//
// This library does not link the core: the store client is //launch:tcp_node_roll_call's,
// which sets node_roll_call_opener() as it is loaded (tools/launch links it). Without it (the
// self-launching examples, whose jobs are one machine's) there is no roll call.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launch/job_failure_board.h"

namespace distcomm {
namespace launch {

// A launcher whose beat has not advanced for this long, while it had not said its ranks
// ended, is taken for lost. Beats come every kRollCallBeat.
constexpr std::chrono::milliseconds kRollCallBeat{1000};
constexpr std::chrono::milliseconds kRollCallSilence{5000};

// One machine lost, as node 0's launcher saw it.
struct LostMachine {
  int node_rank = -1;
  std::string who;  // what its launcher said of itself: "ranks 2-3 on host-b, launcher pid 7"
  // How long after node 0's roll call began (about when the job began) its last beat came.
  std::chrono::steady_clock::duration last_seen{};
};

class NodeRollCall {
 public:
  virtual ~NodeRollCall() = default;
  // Another machine's launcher, as its attempt ends: how its ranks ended ("ranks 2-3 exited
  // 0"); its beats stop. Best-effort, bounded, never throws.
  virtual void ended(const std::string& how) = 0;
  // Node 0's launcher, once its own ranks ended and the job succeeded here: waits until every
  // other machine's launcher has said its ranks ended or has gone silent (at most `wait`),
  // and returns the machines lost. Never throws.
  virtual std::vector<LostMachine> lost(std::chrono::milliseconds wait) = 0;
};

// Opens the roll call of node `node_rank` of `nnodes` in the job's store at `address`;
// `who` is what this launcher says of itself. The beating (another node) or watching (node
// 0) begins at once, in a thread of its own, and ends as the result is destroyed.
using NodeRollCallOpener = std::function<std::unique_ptr<NodeRollCall>(const JobStoreAddress& address, int nnodes,
                                                                      int node_rank, const std::string& who)>;

// Set once by //launch:tcp_node_roll_call as it is loaded; empty without it.
NodeRollCallOpener& node_roll_call_opener();

// "node 1 (ranks 2-3 on host-b, launcher pid 7) was lost: its launcher went silent without
// saying that its ranks ended, last seen 4.1 s into the job"
std::string lost_machine_text(const LostMachine& m);

}  // namespace launch
}  // namespace distcomm
