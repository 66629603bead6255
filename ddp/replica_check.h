// Checks, before training starts, that every rank wraps the same parameters: averaging
// gradients of tensors that differ between ranks would silently train garbage.
#pragma once

#include <string>
#include <vector>

#include "api/process_group.h"

namespace distcomm {
namespace ddp {

// What one rank brings: one line per tensor ("parameter 'fc0.weight' float32[4, 8] on
// cpu"), or the problems its own validation found (then `entries` is ignored).
struct ReplicaDescription {
  std::vector<std::string> entries;
  std::string local_problems;
};

// Collective over pg (one exchange of host messages). Returns when every rank has no local problems and
// the same entries. Otherwise throws InvalidArgument on EVERY rank -- a problem on one rank
// must not leave the others waiting in the next collective -- with a message naming each
// differing entry and which ranks hold which version.
void verify_replicas(ProcessGroup& pg, const ReplicaDescription& mine);

// Pure part of verify_replicas, for tests: "" when all ranks agree, else the message.
std::string describe_replica_mismatch(const std::vector<ReplicaDescription>& ranks);

}  // namespace ddp
}  // namespace distcomm
