// ProcessGroup::shrink: the survivors of a group that lost ranks form a new group of
// themselves, through the store, without the old group's backend.
//
// Why afresh rather than reusing the old backend's connections: the old backend is what
// failed (a gloo context whose pair to the dead rank closed, an shm segment whose peer left
// mid-round), its state after a failure is whatever the failure left, and a fresh group of
// a few ranks is made in tens of milliseconds here (docs/fault-tolerance.md has the
// figures), well within the second a recovery may take.
#include <algorithm>
#include <string>
#include <vector>

#include "api/diagnostics/op_fingerprint.h"
#include "api/ops/argument_checks.h"
#include "api/errors.h"
#include "api/plugin/plugin_registry.h"
#include "api/process_group.h"

namespace distcomm {
namespace {

std::string joined(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text;
}

}  // namespace

std::shared_ptr<ProcessGroup> ProcessGroup::shrink(const std::vector<int>& excluded, std::chrono::milliseconds timeout) {
  if (in_fork_child()) refuse_in_fork_child(checks_->where_prefix() + "shrink");
  const std::string where = "shrink of group '" + name() + "' (rank " + std::to_string(rank()) + "/" +
                            std::to_string(size()) + ")";
  std::vector<int> gone = excluded;
  std::sort(gone.begin(), gone.end());
  for (size_t i = 0; i < gone.size(); ++i) {
    if (gone[i] < 0 || gone[i] >= size()) {
      throw InvalidArgument(where + ": excluded rank " + std::to_string(gone[i]) + " is outside [0, " +
                            std::to_string(size()) + ")");
    }
    if (i && gone[i] == gone[i - 1]) {
      throw InvalidArgument(where + ": excluded rank " + std::to_string(gone[i]) + " is listed twice in " +
                            rank_list_text(excluded));
    }
    if (gone[i] == rank()) {
      throw InvalidArgument(where + ": 'excluded' " + rank_list_text(excluded) +
                            " names this rank; only the survivors call shrink");
    }
  }
  // Every backend of the group must meet its peers through the store: one that finds them
  // by itself cannot be told to leave a rank out.
  std::string self_meeting;
  for (const std::string& plugin : BackendSpec::parse(options_.backend).names(plugins())) {
    if (load_plugin(plugin, plugins()).flags & DISTCOMM_PLUGIN_SELF_RENDEZVOUS) self_meeting = plugin;
  }
  if (!self_meeting.empty()) {
    throw Unsupported(where + ": backend '" + self_meeting +
                      "' meets its peers without the store (mpi: through MPI_COMM_WORLD, which cannot lose a rank "
                      "without ULFM, and Open MPI 4.1 has none); restart the job instead (tools/launch "
                      "--max_restarts)");
  }
  if (!options_.store) {
    throw Unsupported(where + ": the group has no store, and the survivors meet through one; create the group with "
                      "a store (init_method env://, tcp:// or file://)");
  }
  // Counted on every survivor alike (each calls shrink the same number of times), so that
  // a second shrink with the same list is another group.
  const uint64_t id = shrinks_++;
  std::vector<int> survivors;
  for (int r = 0; r < size(); ++r) {
    if (!std::binary_search(gone.begin(), gone.end(), r)) survivors.push_back(r);
  }
  ProcessGroupOptions o = options_;
  o.rank = static_cast<int>(std::find(survivors.begin(), survivors.end(), rank()) - survivors.begin());
  o.size = static_cast<int>(survivors.size());
  o.group_name = subgroup_name("shrink" + std::to_string(id) + "-without-" + (gone.empty() ? "none" : joined(gone)));
  o.global_ranks.clear();
  for (int r : survivors) o.global_ranks.push_back(global_rank(r));
  // A hierarchical group goes across hosts over gloo, as a subgroup does: mpi across is for
  // the job mpirun started, and one whose ranks are lost cannot go on over it (see above).
  o.backend_config["hier_across"] = "gloo";  // absent means gloo too
  // The ops' timeout stays the group's; `timeout` bounds only the creation.
  o.creation_timeout = timeout > std::chrono::milliseconds::zero() ? timeout : options_.timeout;
  o.creation_deadline = std::chrono::steady_clock::now() + o.creation_timeout;
  return build(std::move(o), BackendSpec::parse(options_.backend), /*check_config=*/false);
}

}  // namespace distcomm
