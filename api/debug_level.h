// DebugLevel: how much a group checks and says beyond its default (TORCH_DISTRIBUTED_DEBUG's
// levels). Set by the program (InitOptions::debug) or DISTCOMM_DEBUG, read at the edge by
// init_process_group, inherited by subgroups.
//   OFF     the default: the backends' own checks (gloo's tags and slots, mpi's agreement
//           check, probed receives) and the stall watch still turn a disagreement into a
//           named error.
//   INFO    also logs, to stderr, each group's creation (every rank's line, in rank order,
//           printed by the group's rank 0) and, when it is destroyed, the ops this rank
//           issued on it, per type (each rank its own line).
//   DETAIL  also compares every op's whole fingerprint (api/diagnostics/op_fingerprint.h) before it
//           runs: a collective's across the group (one host exchange per op), a recv's
//           with the send it received (posted by the sender on the group's store; a recv
//           from any rank once its source is known; a batch's sends and recvs as single
//           ops, also where the backend takes the batch whole). Any
//           difference is a Desync (collectives, on every rank, with the table of what
//           each rank called) or an InvalidArgument (a recv, naming both sides). Costs a
//           store round trip or a host collective per op: for finding a bug, not for
//           production.
#pragma once

#include <string>

namespace distcomm {

enum class DebugLevel { kOff, kInfo, kDetail };

// "OFF", "INFO", "DETAIL" (any case); "" is OFF. Throws InvalidArgument naming the value.
DebugLevel parse_debug_level(const std::string& text);
const char* debug_level_name(DebugLevel level);

}  // namespace distcomm
