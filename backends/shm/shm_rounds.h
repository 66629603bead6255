// The round protocol that every collective of a group runs on.
//
// A group's collectives advance in rounds, numbered alike on every rank (every rank runs
// the same ops with the same round counts). In round G a rank writes its slot G % slots,
// then posts (posted = G + 1, release); a peer that needs the data waits until the rank's
// posted exceeds G, then reads the slot in place. A rank finishes every read of round G
// before it posts round G + 1, so "posted >= G + 1" also says "done reading round G - 1":
// a rank may overwrite slot G once every peer has posted round G - slots + 1. That one
// counter per rank is all the synchronisation: sequence-numbered flags, no locks, no
// per-round acknowledgements.
//
// Every round's inline line says which op the round belongs to (the op's agreement hash)
// and which round it is (the tag), written before the post. A reader compares the op with
// its own before it touches a peer's data: ranks whose ops disagree (another op, count,
// dtype, root or reduction at the same point) never read or reduce each other's bytes, and
// the engine turns the difference into a Desync. A round that carries at most kInlineBytes
// per rank goes through that line instead of its slot: a reader waits for the tag rather
// than the post, so the data arrives with the news. The inline line of round G is reused
// at round G + slots, like the slot.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/shm/shm_group.h"
#include "backends/shm/shm_wait.h"

namespace distcomm {
namespace shm {

class RoundCursor {
 public:
  explicit RoundCursor(const MappedGroup& group);

  uint64_t round() const { return round_; }
  uint8_t* my_slot(uint64_t round) const { return group_.self().slot(round); }
  const uint8_t* slot_of(int peer, uint64_t round) const { return group_.of(peer).slot(round); }
  uint8_t* my_inline(uint64_t round) const { return group_.self().inline_line(round).data; }
  const uint8_t* inline_of(int peer, uint64_t round) const { return group_.of(peer).inline_line(round).data; }

  // Whether `peer` has posted at least `posted` rounds. If not, fills *blocker with what to
  // sleep on. Throws GroupFailedError when the peer has failed or closed before posting it.
  bool reached(int peer, uint64_t posted, Blocker* blocker);
  // Whether `peer` has written its inline line of `round`; if not, fills *blocker (spin on
  // the tag, sleep on the peer's post). Throws as reached() does.
  bool tagged(int peer, uint64_t round, Blocker* blocker);
  // Marks this rank's inline line as round `round`'s, of the op whose agreement hash is `op`
  // (before post()).
  void mark(uint64_t round, uint64_t op);
  // The op `peer` marked round `round` with; valid once reached() or tagged() said yes.
  uint64_t op_of(int peer, uint64_t round) const { return group_.of(peer).inline_line(round).op; }
  // Whether this rank may write its slot of round `round`: every peer is done reading the
  // previous use of that slot.
  bool may_write(uint64_t round, Blocker* blocker);
  // Publishes the current round and moves to the next.
  void post();
  void advance() { ++round_; }

 private:
  // Fills *blocker to sleep on `peer`'s post, whose futex word read `wake`.
  void sleep_on_post(int peer, uint32_t wake, Blocker* blocker) const;

  const MappedGroup& group_;
  const uint64_t first_;  // the group's first round (Layout::first_round)
  uint64_t round_;
  std::vector<uint64_t> known_;  // each peer's posted count as last read
};

}  // namespace shm
}  // namespace distcomm
