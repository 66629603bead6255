// Whether a member of a fault-tolerant job is gone, as this process can tell: a dead mark
// in the store (whoever learned it first wrote why), its process on this host gone (by
// /proc, within the monitor's interval), or its heartbeat, once begun, not moved for
// heartbeat_timeout since this object began to watch it (a member on another host, or a
// stopped one: the heartbeat comes from the monitor's thread, so a member whose own thread
// hangs while the process runs keeps beating, and is found by its op timeout). Counted over
// this observer's own reads only: after a gap of the timeout between two of them (its
// store calls blocked, as everyone's are while the store stalls, or it did not look) what
// it knew is stale, and the count starts again (a 4 s stall of the store used to end with
// every member taking the others for gone at the first read after it).
//
// Not thread-safe: the liveness monitor's thread and the generation's forming (the
// caller's thread) each have their own, each over its own store connection.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "api/store/store.h"
#include "ft/member_record.h"

namespace distcomm {
namespace ft {

// The error of a member that finds it was taken for gone (its dead mark, `why`): it is
// fenced and ends, whatever it was doing; it never rejoins.
std::string fenced_message(const std::string& id, const std::string& why);

// How the dead mark of a refused joiner begins (its state differs from the members', or its
// step fails where theirs did not: joiner_refusal.h). Such a joiner ends on its own (its
// Manager throws), so it is left out like one gone but never fenced: its launcher must not
// kill it before it has said why it was refused.
inline constexpr char kRefusedMark[] = "refused: ";

class Liveness {
 public:
  using Clock = std::chrono::steady_clock;
  // store: the job's "ft/" namespace.
  Liveness(StorePtr store, std::chrono::milliseconds heartbeat_timeout);

  // Why `id` is gone, "" while it is not known to be. by_heartbeat: also judge it by its
  // heartbeat (one store read); without it only the dead mark and, on this host, its
  // process are asked.
  std::string gone(const std::string& id, bool by_heartbeat = true);
  // Why `id`'s process on this host is gone ("" when it lives, or is not on this host, or
  // has no record yet): no store call once its record is read.
  std::string gone_here(const std::string& id);
  // Writes why `id` is gone, unless another has (the first cause stays).
  void mark_dead(const std::string& id, const std::string& why);
  // `id` was found gone by this member: marks it dead (as mark_dead) and fences it: writes
  // fenced/<id>, its process and the first cause, so that the launcher that started that
  // process kills it (api/process/fenced_member.h); a member with no record yet has no
  // process to name. Never for this process's own member (a joiner that refuses itself
  // ends on its own), and not for a refused joiner (kRefusedMark): only its dead mark.
  void fence(const std::string& id, const std::string& why);
  // The member's record (read once, then kept); throws Timeout when it has none by then.
  const MemberRecord& record(const std::string& id, std::chrono::milliseconds wait);

 private:
  // Its record if it has written one (read once, then kept), else null; never waits.
  const MemberRecord* written_record(const std::string& id);

  struct Beat {
    int64_t count = -1;
    Clock::time_point since;    // when this observer first read `count`
    Clock::time_point read_at;  // its last read of the heartbeat
  };
  StorePtr store_;
  std::chrono::milliseconds heartbeat_timeout_;
  std::map<std::string, MemberRecord> records_;
  std::map<std::string, Beat> beats_;
};

}  // namespace ft
}  // namespace distcomm
