// The job's store, served by the launcher: a process that outlives every rank, so that the
// survivors of any rank's death -- rank 0's included -- still meet in it. (Served by rank 0,
// as a job started by hand has it, the store goes with rank 0.)
//
// This library does not link the core, whose TCPStoreServer it is: a caller that does
// (tools/launch, through launch/tcp_job_store.h) hands run_job a JobStoreServer in
// LaunchOptions::serve_store. Without one, rank 0 serves the store, as before.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/process/fenced_member.h"
#include "api/process/job_identity.h"
#include "launch/refused_member.h"

namespace distcomm {
namespace launch {

// What one attempt's store is: where it listens, and whom it admits.
struct JobStoreRequest {
  std::string host;  // MASTER_ADDR
  int port = 0;      // MASTER_PORT; 0: any free port (one machine)
  // Where to listen, as rank 0 would ($DISTCOMM_STORE_BIND, TCPStoreOptions::bind_address):
  // "" is host's address, "*" every interface, else that address.
  std::string bind;
  JobIdentity identity;  // the attempt's: a rank of another attempt is refused
  // The job's shape as this launcher was given it: a rank whose world size is another
  // (its launcher was given another --nproc_per_node or --nnodes) is refused.
  int world_size = -1;
  int nnodes = 1;
  int nproc_per_node = 1;
  // Which machine's launcher asks. 0: node 0's, which serves the store. Another (a static
  // job's other machines, before they start their ranks: run_job): serve nothing, but check
  // that node 0's launcher was given the same --nnodes and --nproc_per_node as this one --
  // a job of the same world size but another shape would otherwise start a rank twice, or
  // wait for one that never comes, until the ranks' timeout -- and, when it was not, tell
  // node 0's launcher (its store's doomed()) and throw. See JobStoreServer.
  int node_rank = 0;
  // With node_rank != 0: an attempt of another machine's launcher, once the check above is
  // done: no check, no serving; what is returned reads node 0's store for what this
  // launcher must see there (refusal(): its refused joiners). Never nullptr, never throws.
  bool reader_only = false;
};

// What the job's store says to one ask (JobStore::ask) about this launcher's processes in a
// fault-tolerant job: which of them the members refused, and whether the members stopped
// the job. Both in one request.
struct StoreWord {
  bool answered = false;               // false: the store was not reached, or not asked (quiet)
  std::vector<RefusedMember> refused;  // those of the ids asked whose dead mark is a refusal
  std::string stopped;                 // why the members stopped the job (job_stopped_key); "" if not
};

// A store being served: from its creation, listening, until it is destroyed. It serves in
// threads of its own and throws nothing out of them.
class JobStore {
 public:
  virtual ~JobStore() = default;
  // The port it listens on (the one it picked for port 0).
  virtual int port() const = 0;
  // Why the job cannot run, once the store has refused a rank that counts another world
  // size (its node's launcher was given other flags) while a node's launcher had yet to
  // join, or another machine's launcher that the job waits for found that it was given
  // another --nnodes or --nproc_per_node than this one; "" until then. A stranger refused
  // once its node has joined leaves it "": the running job goes on.
  // Its ranks and this machine's would otherwise wait for each other until their timeout
  // (30 minutes).
  virtual std::string doomed() const = 0;
  // Readable once doomed() is not "" (never read, never reset): polled beside the ranks'
  // output, so that the launcher stops its ranks at once.
  virtual int doomed_fd() const = 0;
  // The members of a fault-tolerant job that their group fenced since the last call
  // (api/process/fenced_member.h), those whose process is on this host: the launcher kills
  // the ones that are its ranks.
  virtual std::vector<local::FencedMember> take_fenced() { return {}; }
  // Readable while take_fenced() has something to give (-1: it never has).
  virtual int fenced_fd() const { return -1; }
  // Which of `member_ids` (this launcher's processes' ids in a fault-tolerant job:
  // refused_member.h) the job's members refused as joiners, and whether they stopped the
  // job (job_stopped_key), as the job's store says now: the launcher leaves refused exits
  // out of the job's failures and does not replace them, and replaces nothing once the job
  // is stopped. Asked, not pushed, so that every machine's launcher sees its own ranks'
  // refusals in node 0's store (the server's created-key hook is node 0's alone), and only
  // when it matters: at a failed exit, before a replacement starts, at the end. One request
  // (a connection of its own, closed after it), bounded by a short timeout; never throws: a
  // store it cannot reach answers nothing (said once). After such a failure, asks that are
  // not `must_ask` (those at exits) answer nothing at once for a while rather than hold the
  // launcher's loop again; a must_ask one (before a replacement starts, at the end) asks.
  virtual StoreWord ask(const std::vector<std::string>& member_ids, bool must_ask) {
    (void)member_ids;
    (void)must_ask;
    return {};
  }
  // Rank `rank` of this launcher ended (`how`: "exit code 0"), and no replacement will take
  // its place. If it never came to init_process_group, the store says so where the world's
  // creation looks (its creation-failed key): the ranks waiting there for it end within
  // half a second, naming it, instead of at their timeout (30 minutes by default). A rank
  // that came to init needs nothing here: its groups' backends see it go. Quick, and never
  // throws (the launcher's loop calls it).
  virtual void rank_ended(int rank, const std::string& how) {
    (void)rank;
    (void)how;
  }
  // Writes `value` at `key` (as the server holds it) for the ranks to read: what this
  // launcher tells a fault-tolerant job's members of its replacements (replacement_notice.h).
  // Best-effort: quick, never throws; given up once the store could not be reached.
  virtual void tell(const std::string& key, const std::string& value) {
    (void)key;
    (void)value;
  }
  // Node 0's launcher, before this store is destroyed: its farewell (waiting for the other
  // machines to leave it) ends by `deadline`, the one deadline its roll call's wait had too
  // (attempt.cc); `ranks_ended` is when this machine's ranks ended, what its one line on
  // the wait counts from (tcp_job_store.cc); a time_point() there: say nothing (the wait was cut
  // short by a stopping signal, which has its own line).
  virtual void leave_by(std::chrono::steady_clock::time_point deadline,
                        std::chrono::steady_clock::time_point ranks_ended) {
    (void)deadline;
    (void)ranks_ended;
  }
};

// Starts serving a store, or throws std::runtime_error saying why it cannot (the port is
// taken, the address is not this host's). Given another node_rank than 0 and reader_only,
// it returns node 0's store's reader (JobStoreRequest::reader_only). Given another
// node_rank than 0 otherwise it serves nothing
// and returns nullptr once node 0's store (waited for as the ranks would) says that node 0's
// launcher runs the job's shape; it throws std::runtime_error saying why the job cannot run
// when that launcher runs another shape (both named), or node 0's store refuses it (token,
// run id); a store that cannot be reached leaves the ranks to start unchecked.
using JobStoreServer = std::function<std::unique_ptr<JobStore>(const JobStoreRequest&)>;

}  // namespace launch
}  // namespace distcomm
