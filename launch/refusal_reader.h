// How a launcher learns that the members of a fault-tolerant job refused one of its ranks'
// processes as a joiner (launch/refused_member.h): it asks the job's store for the dead
// marks of those processes' member ids. Every machine's launcher reaches that store (node
// 0's, where the ranks meet), so each sees its own ranks' refusals; the store's created-key
// hook (TCPStoreServerOptions::on_created) runs only in node 0's launcher, which serves it.
// The same request reads whether the members stopped the job (job_stopped_key): then no
// replacement can join, and none is started.
//
// Asked at the moments that matter, not watched: a process's failed exit (is it a failure
// of the job?), a replacement about to start (is it the same program, refused again?), and
// the end (the job's outcome). A job that is not fault-tolerant costs one small request per
// failed exit, and nothing while its ranks run.
//
// Part of //launch:tcp_job_store (it is a TCPStore client: it links the core).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "api/process/job_identity.h"
#include "launch/job_store.h"
#include "launch/refused_member.h"

namespace distcomm {
namespace launch {

class RefusalReader {
 public:
  // The store as the job's ranks reach it: `host`:`port`, admitting `identity`.
  RefusalReader(std::string host, int port, JobIdentity identity);

  // Those of `member_ids` whose dead mark in the store says that the members refused them,
  // and the members' stop of the job if they stopped it (JobStore::ask). One request over a
  // connection of its own, closed after it (an idle connection would count among the
  // store's clients, and hold node 0's farewell open), bounded by kAskTimeout. Never throws:
  // a store it cannot reach answers nothing (answered false), which is said once; for
  // kQuietAfterFailure after that, an ask that is not `must_ask` answers nothing at once
  // rather than hold the launcher's loop again. A must_ask one (before a replacement
  // starts, at the end: where a wrong answer replaces a refused joiner or fails a job that
  // succeeded) asks whatever came before.
  StoreWord ask(const std::vector<std::string>& member_ids, bool must_ask) noexcept;

  static constexpr std::chrono::milliseconds kAskTimeout{2000};
  static constexpr std::chrono::seconds kQuietAfterFailure{10};

 private:
  const std::string host_;
  const int port_;
  const JobIdentity identity_;
  std::chrono::steady_clock::time_point quiet_until_{};
  bool said_ = false;
};

// The JobStore of another machine's launcher's attempt (JobStoreRequest::reader_only): it
// serves nothing (node 0's launcher does) and reads node 0's store at request.host:
// request.port for ask(). Never throws.
std::unique_ptr<JobStore> read_node0_store(const JobStoreRequest& request);

}  // namespace launch
}  // namespace distcomm
