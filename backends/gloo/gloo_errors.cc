#include "backends/gloo/gloo_errors.h"

#include <thread>

#include <gloo/common/error.h>

#include "api/diagnostics/launcher_stops.h"
#include "api/diagnostics/op_fingerprint.h"  // ranks_text: the plugin calls the core's (libdistcomm.so)
#include "backends/gloo/gloo_connection_watch.h"

namespace distcomm {
namespace gloo {
namespace {

// How long an op that lost a connection to a peer that only failed because of another
// waits for the connection watch to name that other: its process-end grace and more.
constexpr std::chrono::milliseconds kCauseWait{400};

bool is_timeout(const std::string& gloo_message) { return gloo_message.find("Timed out") != std::string::npos; }

// A closed connection of another rank's doing: worth asking the connection watch whose.
bool lost_to_a_peer(std::exception_ptr raw) {
  try {
    std::rethrow_exception(raw);
  } catch (const ::gloo::IoException& e) {
    return !is_timeout(e.what()) && !closed_by_this_rank(e.what());
  } catch (...) {
    return false;
  }
}

// Peers that closed the group cleanly (a goodbye) while this op still needed them: they
// never took part in it.
PeerFailure peers_left(const std::vector<int>& ranks) {
  const bool one = ranks.size() == 1;
  return PeerFailure(ranks_text(ranks) +
                     " closed the group with no op in flight while this op still waited for " +
                     (one ? "it" : "them") + " (" + (one ? "it" : "they") + " never took part in this op)");
}

}  // namespace

std::exception_ptr to_distcomm_error(std::exception_ptr raw, std::chrono::milliseconds timeout) {
  try {
    std::rethrow_exception(raw);
  } catch (const Error&) {
    return raw;
  } catch (const ::gloo::IoException& e) {
    const std::string msg = e.what();
    if (is_timeout(msg)) {
      return std::make_exception_ptr(
          Timeout("timed out after " + std::to_string(timeout.count()) +
                  " ms waiting for peers: not every rank of the group joined this op in time, or one is "
                  "stuck (gloo: " + msg + ")"));
    }
    return std::make_exception_ptr(PeerFailure(
        "lost the connection to a peer: its process may have died or closed the group (gloo: " + msg + ")"));
  } catch (...) {
    return std::make_exception_ptr(Error("gloo failed: " + message_of(raw)));
  }
}

bool closed_by_this_rank(const std::string& gloo_message) {
  return gloo_message.find("Application timeout caused pair closure") != std::string::npos;
}

PeerFailure peers_died(const std::vector<int>& ranks) {
  if (ranks.size() == 1) {
    return PeerFailure("rank " + std::to_string(ranks[0]) + " closed its connection (the process died or exited)");
  }
  return PeerFailure(ranks_text(ranks) + " closed their connections (the processes died or exited)");
}

int departure_behind(const std::vector<LostPeer>& peers) {
  int departed = -1;
  for (const LostPeer& p : peers) {
    if (p.after_departure_of < 0) return -1;
    if (departed < 0) departed = p.after_departure_of;
  }
  return departed;
}

PeerFailure peers_lost(const std::vector<LostPeer>& peers) {
  std::vector<int> ranks;
  for (const LostPeer& p : peers) ranks.push_back(p.rank);
  const int departed = departure_behind(peers);
  if (departed >= 0) {
    return PeerFailure("rank " + std::to_string(departed) +
                       " left the group (closed it with no op in flight) while the others still needed it; " +
                       ranks_text(ranks) +
                       " went after that (most likely failing because of it)");
  }
  // Peers whose connections stay open were seen to end by their processes (pidfds, only
  // for peers on this host: gloo_connection_watch.h), not by their connections: "closed
  // their connections" would say what nobody saw; and peers whose connections closed (on
  // any host) are said as such, in a clause of their own.
  std::vector<int> held, closed;
  std::string held_pids;
  for (const LostPeer& p : peers) {
    if (!p.connection_held) {
      closed.push_back(p.rank);
      continue;
    }
    held.push_back(p.rank);
    held_pids += (held_pids.empty() ? "" : ", ") + std::to_string(p.pid);
  }
  if (held.empty()) return peers_died(ranks);
  const bool one_held = held.size() == 1;
  const std::string held_text =
      (one_held ? "rank " + std::to_string(held[0]) + " (pid " + held_pids + ") died: its process ended"
                : ranks_text(held) + " (pids " + held_pids + ") died: their processes ended on this host, each") +
      " while a process it forked still holds its connections open";
  if (closed.empty()) return PeerFailure(held_text);
  return PeerFailure(held_text + "; and " + peers_died(closed).what());
}

int culprit_among(const std::vector<int>& ranks) { return ranks.size() == 1 ? ranks.front() : -1; }

std::exception_ptr record_op_failure(GroupFailure& failure, ConnectionWatch* connections, std::exception_ptr raw,
                                     std::chrono::milliseconds timeout, const Work& op, int peer) {
  std::exception_ptr error = to_distcomm_error(raw, timeout);
  int culprit = -1;
  // Once the group has failed, its first failure answers (GroupFailure::record).
  if (connections && !failure.failed() && lost_to_a_peer(raw)) {
    // Peers that closed without a goodbye after another left cleanly most likely failed
    // because of it: that departure is the failure, unless a peer went on its own first.
    std::vector<int> died, left;
    bool consequences = false;
    for (const ClosedPeer& p : connections->closed_peers()) {
      // A transfer waits on its peer's connection alone: a rank that left cleanly before
      // its peer died never had a part in it (a recv from rank 1 was blamed on rank 2's
      // orderly exit), and its peer is the culprit even if it went after that departure.
      if (peer >= 0 && p.rank != peer) continue;
      if (p.said_goodbye) {
        left.push_back(p.rank);
      } else if (p.said_failed) {
        consequences = true;  // that peer's end follows its group's failure: not the cause
      } else if (p.after_departure_of < 0 || peer >= 0) {
        died.push_back(p.rank);
      }
    }
    if (died.empty() && left.empty() && consequences) {
      // The cause is elsewhere: a peer whose process ended while a child of it holds its
      // connection (the watch names it once the kernel marks it ended), or one on the
      // board. Given that moment, the group's failure is the watch's, recorded for this op.
      const auto until = std::chrono::steady_clock::now() + kCauseWait;
      while (!failure.failed() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    if (!died.empty()) {
      // Ranks that went together are named together (a transfer's peer alone is its cause).
      if (peer < 0) died = connections->gone_together_with(died);
      // Those their launcher stopped after another failed are no culprits (their machine's
      // ranks go together as its launcher stops them).
      const LauncherStops split = launcher_stops(failure, died);
      if (split.stopped.empty()) {
        error = std::make_exception_ptr(peers_died(died));
      } else {
        // Named apart, in the words every backend uses (api/diagnostics/launcher_stops.h).
        error = std::make_exception_ptr(PeerFailure(
            with_launcher_stopped_text(split.others.empty() ? "" : peers_died(split.others).what(), split)));
      }
      // A consequence either way; where every lost peer was stopped, one of them stands as
      // the cause (a known culprit: the failure's quick path, not its 1 s look for one).
      culprit = split.others.empty() ? died.front() : culprit_among(split.others);
    } else if (!left.empty()) {
      // A rank that left cleanly published where it was (the stall watch's last report),
      // and the explainer compares that with the others' ops: it never ran this op, so the
      // ranks disagree (a Desync with the table), or it is named as having left.
      return failure.record_departure(std::make_exception_ptr(peers_left(left)), op, culprit_among(left));
    }
  }
  return failure.record(error, op, culprit);
}

}  // namespace gloo
}  // namespace distcomm
