#include "launch/job_outcome.h"

#include <cstdio>

#include "launch/node_roll_call.h"

namespace distcomm {
namespace launch {

std::string rank_span_text(int first, int count) {
  if (count == 1) return "rank " + std::to_string(first);
  return "ranks " + std::to_string(first) + "-" + std::to_string(first + count - 1);
}

namespace {

std::string tenths(std::chrono::steady_clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

std::string lost_machine_text(const LostMachine& m) {
  return "node " + std::to_string(m.node_rank) + (m.who.empty() ? std::string() : " (" + m.who + ")") +
         " was lost: its launcher went silent without saying that its ranks ended, last seen " +
         tenths(m.last_seen) + " into the job";
}

std::string success_line(const JobResult& r, std::chrono::steady_clock::duration elapsed) {
  if (r.exit_code != 0 || r.interrupted_by != 0 || r.local_ranks <= 0) return "";
  std::string line = "the job succeeded: " + rank_span_text(r.first_rank, r.local_ranks) + " of " +
                     std::to_string(r.world_size);
  if (r.nnodes > 1 || r.round > 0) {
    line += " on this machine (node " + std::to_string(r.node_rank) + " of " + std::to_string(r.nnodes) +
            (r.round > 0 ? ", rendezvous round " + std::to_string(r.round) : std::string()) + ")";
  }
  line += " exited 0 after " + tenths(elapsed);
  if (r.restarts > 0) line += " and " + std::to_string(r.restarts) + (r.restarts == 1 ? " restart" : " restarts");
  for (size_t i = 0; i < r.survived.size(); ++i) {
    line += (i == 0 ? "; it went on after " : "; then after ") + r.survived[i];
  }
  return line;
}

NodeRollCallOpener& node_roll_call_opener() {
  static NodeRollCallOpener opener;
  return opener;
}

}  // namespace launch
}  // namespace distcomm
