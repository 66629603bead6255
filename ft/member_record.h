// Who a member of a fault-tolerant job is, as the others see it in the store: its id, the
// process behind it and what state it trains, so that a peer on the same host can tell at
// once whether that process still lives, and a joiner's state can be checked against the
// members' before it is admitted.
#pragma once

#include <string>
#include <sys/types.h>

namespace distcomm {
namespace ft {

struct MemberRecord {
  std::string id;
  // shared_memory_domain(): boot id and PID namespace. Peers in the same domain see this
  // member's pid and check it themselves; others rely on its heartbeat and dead marks.
  std::string domain;
  pid_t pid = 0;
  // The process's start time (field 22 of /proc/<pid>/stat, clock ticks since boot): a pid
  // reused by another process is not taken for this member.
  unsigned long long start_ticks = 0;
  // The state it trains (ManagerOptions::state_signature); a joiner must match the members'.
  std::string signature;

  std::string encode() const;
  // Throws std::invalid_argument on text encode() did not make.
  static MemberRecord decode(const std::string& text);
  static MemberRecord of_this_process(const std::string& id, const std::string& signature);
};

// Why the process of `record` is known to be gone ("" when it is not): only for a record of
// this host's PID namespace. A zombie (killed, not yet reaped) counts as gone.
std::string process_gone(const MemberRecord& record);

}  // namespace ft
}  // namespace distcomm
