#include "api/group/cannot_take_part.h"

namespace distcomm {
namespace {

// Not a character any post otherwise starts with: the core's texts (a host exchange's
// purpose, a refusal) and numbers (a member list's) all start with a printable one.
constexpr char kMark = '\x1f';

}  // namespace

std::string cannot_take_part_text(const std::string& why) { return kMark + why; }

bool says_cannot_take_part(const std::string& posted) { return !posted.empty() && posted.front() == kMark; }

PeerFailure cannot_take_part_failure(const std::string& call, int rank, const std::string& posted) {
  return PeerFailure(call + ": rank " + std::to_string(rank) + " cannot take part: " + posted.substr(1));
}

}  // namespace distcomm
