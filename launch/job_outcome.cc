#include "launch/job_outcome.h"

#include "launch/duration_text.h"
#include "launch/node_roll_call.h"

namespace distcomm {
namespace launch {

std::string rank_span_text(int first, int count) {
  if (count == 1) return "rank " + std::to_string(first);
  return "ranks " + std::to_string(first) + "-" + std::to_string(first + count - 1);
}

std::string other_machine_text(const OtherMachine& m) {
  const std::string node = "node " + std::to_string(m.node_rank);
  switch (m.state) {
    case OtherMachine::State::kLost:
      return node + " (" + m.who + ") was lost: its launcher went silent without saying that its ranks ended, last seen " +
             tenths_text(m.last_seen) + " into the job";
    case OtherMachine::State::kFailed:
      return node + "'s ranks failed (" + m.who + ")";
    case OtherMachine::State::kRunning:
      if (!m.checked_in) return node + "'s launcher had not checked in when this launcher stopped waiting for it";
      return node + "'s ranks were still running when this launcher stopped waiting for them (" + m.who + ")";
    case OtherMachine::State::kExitedZero:
      break;
  }
  return node + "'s ranks exited 0 (" + m.who + ")";
}

std::string clean_exit_line(const JobResult& r, std::chrono::steady_clock::duration elapsed) {
  if (r.exit_code != 0 || r.interrupted_by != 0 || r.local_ranks <= 0) return "";
  // Only node 0's launcher of a static job across machines hears how the others' ranks
  // ended; another machine's knows its own alone.
  const bool static_across_machines = r.nnodes > 1 && r.round == 0;
  const bool job_succeeded = !static_across_machines || (r.node_rank == 0 && r.others_clean);
  std::string line = (job_succeeded ? "the job succeeded: " : "") + rank_span_text(r.first_rank, r.local_ranks) +
                     " of " + std::to_string(r.world_size);
  if (r.nnodes > 1 || r.round > 0) {
    line += " on this machine (node " + std::to_string(r.node_rank) + " of " + std::to_string(r.nnodes) +
            (r.round > 0 ? ", rendezvous round " + std::to_string(r.round) : std::string()) + ")";
  }
  line += " exited 0 after " + tenths_text(elapsed);
  if (r.restarts > 0) line += " and " + std::to_string(r.restarts) + (r.restarts == 1 ? " restart" : " restarts");
  for (size_t i = 0; i < r.survived.size(); ++i) {
    line += (i == 0 ? "; it went on after " : "; then after ") + r.survived[i];
  }
  for (const std::string& other : r.others_not_clean) line += "; " + other;
  return line;
}

NodeRollCallOpener& node_roll_call_opener() {
  static NodeRollCallOpener opener;
  return opener;
}

}  // namespace launch
}  // namespace distcomm
