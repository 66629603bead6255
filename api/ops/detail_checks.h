// DISTCOMM_DEBUG=DETAIL's checks, wrapped around an op by the ProcessGroup's pipeline (as
// c10d's ProcessGroupWrapper wraps a group), never written into the ops:
//   - a collective: every rank's fingerprint through the host exchange before the op is
//     issued; Desync when they differ, the table on every rank in groups of up to 8 ranks,
//     else on the lowest rank and one line on the others (desync_summary.h) (every rank saw the same
//     fingerprints, so every rank throws, none has issued the op, and the group stays usable);
//   - a send: its fingerprint posted on the store for its recv (nothing waits: a send may be
//     issued long before its recv);
//   - a recv: once it has ended, its fingerprint compared with the one its sender posted
//     (InvalidArgument naming both); a recv from any rank once its source is known, as that
//     source's next transfer with this rank;
//   - a batch the backend runs natively (nccl): each send and recv in it as the single ones.
// The group makes one only at DETAIL, for groups of more than one rank.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "api/group/host_exchange.h"
#include "api/ops/op_numbering.h"
#include "api/store/store.h"

namespace distcomm {

class DetailChecks {
 public:
  // store: the group's (null without one: point-to-point ops go unchecked); store_prefix:
  // the group's keys in it. The exchange and numbering outlive this.
  DetailChecks(int rank, StorePtr store, std::string store_prefix, HostExchange& exchange, OpNumbering& numbering);

  // Runs the op (issue() hands it to its backend and returns its Work) inside the checks.
  WorkPtr around(const OpSpec& spec, const OpContext& ctx, const std::function<WorkPtr()>& issue);

 private:
  void compare_fingerprints(const OpContext& ctx);
  WorkPtr checked_recv(const WorkPtr& work, const OpContext& ctx);
  WorkPtr checked_batch(const std::vector<P2POp>& ops, const OpSpec& spec, const OpContext& ctx,
                        const std::function<WorkPtr()>& issue);
  std::string p2p_key(int src, int dst, const OpFingerprint& f) const;
  void post_for_recv(const OpFingerprint& send);
  void compare_with_sent(const OpFingerprint& recv, const std::string& description, std::chrono::milliseconds timeout);

  const int rank_;
  const StorePtr store_;
  const std::string store_prefix_;
  HostExchange& exchange_;
  OpNumbering& numbering_;
};

}  // namespace distcomm
