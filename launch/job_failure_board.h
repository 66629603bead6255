// The job's first failure, job-wide: each machine's launcher sees only its own ranks, so in
// a job of several machines (--nnodes) the launcher of a machine whose ranks failed only in
// consequence (an ft member stopping for want of members, a gloo rank whose peer on another
// machine died) would name its own rank's failure as the job's first. Each launcher that
// serves or reaches the job's store (static jobs under tools/launch) therefore leaves its
// machine's first failure there, with its time (FailureNote, at first_failure_key), and at
// its end compares its own with the others': the earliest real failure is the job's first
// (earliest_failure), and the summary says on which machine it was seen.
//
// The same store write marks the ranks this launcher is about to stop because of that
// failure (api/process/launcher_stop.h): a peer on another machine that sees their
// connections close names them as stopped by their launcher, not as culprits.
//
// This library does not link the core: the store client is //launch:tcp_job_failure_board's,
// which sets job_failure_board_opener() as it is loaded (tools/launch links it through
// //launch:tcp_job_store). Without it (the self-launching examples) nothing is published.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/process/job_identity.h"

namespace distcomm {
namespace launch {

// One machine's first failure as its launcher saw it.
struct FailureNote {
  int64_t unix_time_ns = 0;  // when it failed (its error file's time, else its exit's, less the unseen lag)
  int node_rank = 0;         // the machine whose launcher saw it
  int rank = -1;             // the job's rank that failed
  // Its failure is another's: it adopted another rank's failure, or reports the loss of a
  // rank (FailureReport::consequence, lost_rank). A real failure anywhere comes first.
  bool consequence = false;
  std::string text;  // "rank 3 (local rank 1, pid 7) failed first (signal SIGKILL (Killed))"

  std::string encode() const;
  static std::optional<FailureNote> decode(const std::string& text);
};

// Where node `node_rank`'s launcher leaves its note in the job's store.
std::string first_failure_key(int node_rank);

// Where node 0's launcher leaves the job's stop when a stopping signal reached it while it
// waited for the other machines' ranks (JobFailureBoard::publish_job_stop); the other
// machines' launchers read it as they beat (node_roll_call.h) and stop their ranks.
std::string job_stop_key();
// The value there: the signal and node 0's words ("node 0's launcher got SIGTERM ..."), and
// back (nullopt for anything else).
std::string encode_job_stop(int sig, const std::string& why);
std::optional<std::pair<int, std::string>> decode_job_stop(const std::string& text);

// The job's first failure among `notes`: the earliest that is not a consequence; when all
// are, the earliest. nullopt for none.
std::optional<FailureNote> earliest_failure(const std::vector<FailureNote>& notes);

// The job's store as the launchers share it.
class JobFailureBoard {
 public:
  virtual ~JobFailureBoard() = default;
  // Marks each (world rank, why) of `stopping` as stopped by this launcher and leaves `note`
  // at its node's key (replacing an earlier one). Every mark is stored when this returns:
  // the launcher sends its stop after it. Over the board's one connection, made before any
  // rank could fail (tcp_job_failure_board.h), and made again once when it fails; bounded
  // by a short timeout; never throws. False when the store was not reached
  // (unreachable_why() says why); calls shortly after that fail at once.
  virtual bool publish(const FailureNote& note, const std::vector<std::pair<int, std::string>>& stopping) = 0;
  virtual std::string unreachable_why() const = 0;
  // Node 0's launcher, stopped by `sig` after its ranks exited 0, while it waited for the
  // other machines' (attempt_job_stop.cc): leaves `note` at its node's key, then the job's
  // stop at job_stop_key(), for the other machines' launchers to stop their ranks. Bounded
  // and never throws, as publish(); false when the store was not reached.
  virtual bool publish_job_stop(const FailureNote& note, int sig) {
    (void)note;
    (void)sig;
    return false;
  }
  // The notes the other machines' launchers (of nnodes, all but `self`) left so far; empty
  // when the store is not reached. Never throws.
  virtual std::vector<FailureNote> others(int nnodes, int self) = 0;
};

struct JobStoreAddress {
  std::string host;  // MASTER_ADDR
  int port = 0;      // the attempt's MASTER_PORT
  JobIdentity identity;
};

using JobFailureBoardOpener = std::function<std::unique_ptr<JobFailureBoard>(const JobStoreAddress&)>;

// Set once by //launch:tcp_job_failure_board as it is loaded; empty without it.
JobFailureBoardOpener& job_failure_board_opener();

}  // namespace launch
}  // namespace distcomm
