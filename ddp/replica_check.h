// Checks, before training starts, that every rank wraps the same parameters and passes the
// same options: averaging gradients of tensors that differ between ranks would silently
// train garbage, and options that differ would make the ranks issue different collectives
// (a Desync naming DDP's internal ops, a hang, or logging that pairs with the wrong op).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "api/process_group.h"

namespace distcomm {
namespace ddp {

// What one rank brings: one line per tensor ("parameter 'fc0.weight' float32[4, 8] on
// cpu"), or the problems its own validation found (then `entries` is ignored), and the
// options that must agree, (name, value as text), in the same message (no extra round).
// `flag_names` / `flags`: a yes/no setting per tensor ('1' or '0', one per name, in the
// caller's order) that only the caller's own check (verify_replicas' `first`) reads -- the
// libtorch layer's requires_grad of every parameter -- so that it rides in this one message
// instead of a round of its own.
struct ReplicaDescription {
  std::vector<std::string> entries;
  std::string local_problems;
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<std::string> flag_names;
  std::string flags;
};

// A caller's own comparison of every rank's description (rank order): "" when they agree,
// else the message (less the head verify_replicas adds and the final period).
using ReplicaCheck = std::function<std::string(const std::vector<ReplicaDescription>&)>;

// Collective over pg (one exchange of host messages). Returns when every rank has no local
// problems, the same entries and the same options. Otherwise throws InvalidArgument on
// EVERY rank -- a problem on one rank must not leave the others waiting in the next
// collective -- with a message naming each differing entry or option and which ranks hold
// which value, each followed by the advice that fits it. `first`, when given, runs before the
// generic comparison, and a message of its own is thrown alone: it knows more than the
// generic one (a parameter frozen on some ranks only is, to the entries, a tensor missing).
void verify_replicas(ProcessGroup& pg, const ReplicaDescription& mine, const ReplicaCheck& first = {});

// Pure part of verify_replicas, for tests: "" when all ranks agree, else the message (less
// the "DistributedDataParallel (rank r/n, group 'g'): " head and the final period).
std::string describe_replica_mismatch(const std::vector<ReplicaDescription>& ranks);

}  // namespace ddp
}  // namespace distcomm
