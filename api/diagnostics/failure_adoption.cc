#include "api/diagnostics/failure_adoption.h"

#include <cctype>

#include "api/diagnostics/desync_summary.h"
#include "api/errors.h"

namespace distcomm {
namespace internal {
namespace {

const char kEndedItHere[] = "which ended the group on this rank too";

// Where an op description ("rank 7/64 group 'world' ...") starts at `at`: "rank", digits,
// '/', digits, " group '". Returns the size it names, 0 where there is none.
size_t description_at(const std::string& m, size_t at) {
  static const std::string head = "rank ";
  if (m.compare(at, head.size(), head) != 0) return 0;
  size_t i = at + head.size();
  const size_t rank_start = i;
  while (i < m.size() && std::isdigit(static_cast<unsigned char>(m[i]))) ++i;
  if (i == rank_start || i >= m.size() || m[i] != '/') return 0;
  const size_t size_start = ++i;
  size_t size = 0;
  while (i < m.size() && std::isdigit(static_cast<unsigned char>(m[i]))) size = size * 10 + static_cast<size_t>(m[i++] - '0');
  if (i == size_start) return 0;
  // A subgroup's description puts its world rank between ("rank 1/2 (world rank 3) group").
  static const std::string group = " group '", world = " (world rank ";
  if (m.compare(i, group.size(), group) == 0) return size;
  if (m.compare(i, world.size(), world) == 0) return size;
  return 0;
}

// The cause's message as this rank quotes it: a Desync's table folded in a large group.
std::string quoted(const FailureRecord& cause, size_t group_size) {
  if (cause.kind != FailureRecord::Kind::kDesync) return cause.message;
  if (group_size == 0) group_size = group_size_in(cause.message);
  return group_size == 0 ? cause.message : quoted_desync(cause.message, group_size);
}

}  // namespace

size_t group_size_in(const std::string& description) {
  for (size_t at = description.find("rank "); at != std::string::npos; at = description.find("rank ", at + 5)) {
    if (const size_t size = description_at(description, at)) return size;
  }
  return 0;
}

bool quotes_a_quote(const std::string& message) {
  int descriptions = 0;
  for (size_t at = message.find("rank "); at != std::string::npos; at = message.find("rank ", at + 5)) {
    if (description_at(message, at) && ++descriptions >= 2) return true;
  }
  return false;
}

std::exception_ptr explained_by(const FailureRecord& cause, const std::string& world, bool op_in_flight,
                                size_t group_size) {
  const std::string who = "rank " + std::to_string(cause.rank) + world + " of the group";
  const std::string ended = op_in_flight ? kCutThisOpOff : kEndedItHere;
  const std::string message = quoted(cause, group_size);
  if (cause.message.find(kLeftWhileFailing) != std::string::npos) {
    // Its program failed (perhaps in another group: a Timeout there) and it left this one
    // on the way out: the error keeps the kind of that failure, the words say what happened here.
    const std::string words = who + " " + kLeftWhileFailing + ", " + ended + ". Its error: " + message;
    switch (cause.kind) {
      case FailureRecord::Kind::kTimeout: return std::make_exception_ptr(Timeout(words));
      case FailureRecord::Kind::kDesync: return std::make_exception_ptr(Desync(words));
      case FailureRecord::Kind::kInvalidArgument: return std::make_exception_ptr(InvalidArgument(words));
      default: return std::make_exception_ptr(PeerFailure(words));
    }
  }
  switch (cause.kind) {
    case FailureRecord::Kind::kTimeout:
      return std::make_exception_ptr(
          Timeout(who + " timed out and aborted the group, " + ended + ". Its error: " + message));
    case FailureRecord::Kind::kShutDown:
      return std::make_exception_ptr(
          PeerFailure(who + " shut the group down (abort or destruction) with ops of its own in flight"));
    case FailureRecord::Kind::kDesync:
      return std::make_exception_ptr(
          Desync(who + " found that the ranks disagree and aborted the group, " + ended + ". Its error: " + message));
    case FailureRecord::Kind::kInvalidArgument:
      return std::make_exception_ptr(InvalidArgument(
          who + " found a mismatch and aborted the group, " + ended + ". Its error: " + message));
    default:
      return std::make_exception_ptr(
          PeerFailure(who + " failed and aborted the group, " + ended + ". Its error: " + message));
  }
}

bool same_loss(const FailureRecord& other, FailureRecord::Kind kind, int culprit) {
  return culprit >= 0 && kind == FailureRecord::Kind::kPeerFailure &&
         other.kind == FailureRecord::Kind::kPeerFailure && other.culprit == culprit;
}

}  // namespace internal
}  // namespace distcomm
