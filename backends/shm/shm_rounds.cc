#include "backends/shm/shm_rounds.h"

#include <sched.h>

#include "backends/shm/shm_failure.h"

namespace distcomm {
namespace shm {

RoundCursor::RoundCursor(const MappedGroup& group)
    : group_(group),
      first_(group.layout().first_round()),
      round_(first_),
      known_(static_cast<size_t>(group.size()), first_) {}

bool RoundCursor::reached(int peer, uint64_t posted, Blocker* blocker) {
  uint64_t& known = known_[static_cast<size_t>(peer)];
  if (known >= posted) return true;
  RoundLine& line = group_.of(peer).round_line();
  // The futex word first: a post after this read changes it, so a sleep on the value read
  // here cannot miss that post.
  const uint32_t wake = line.wake.load(std::memory_order_acquire);
  known = line.posted.load(std::memory_order_acquire);
  if (known >= posted) return true;
  if (group_.of(peer).state().load(std::memory_order_acquire) != kActive) {
    known = line.posted.load(std::memory_order_acquire);  // it may have posted just before
    if (known >= posted) return true;
    throw GroupFailedError(failure_of_peer(group_.of(peer), peer));
  }
  sleep_on_post(peer, wake, blocker);
  return false;
}

namespace {

uint64_t tag_of(uint64_t round) { return round + 1; }

}  // namespace

bool RoundCursor::tagged(int peer, uint64_t round, Blocker* blocker) {
  const std::atomic<uint64_t>& tag = group_.of(peer).inline_line(round).tag;
  if (tag.load(std::memory_order_acquire) == tag_of(round)) return true;
  // As in reached(): the futex word before the second look, so no post is missed.
  const uint32_t wake = group_.of(peer).round_line().wake.load(std::memory_order_acquire);
  const uint64_t seen = tag.load(std::memory_order_acquire);
  if (seen == tag_of(round)) return true;
  if (group_.of(peer).state().load(std::memory_order_acquire) != kActive) {
    if (tag.load(std::memory_order_acquire) == tag_of(round)) return true;  // tagged just before
    throw GroupFailedError(failure_of_peer(group_.of(peer), peer));
  }
  sleep_on_post(peer, wake, blocker);
  blocker->spin_word = &tag;
  blocker->spin_seen = seen;
  return false;
}

void RoundCursor::mark(uint64_t round, uint64_t op) {
  InlineLine& line = group_.self().inline_line(round);
  line.op = op;
  line.tag.store(tag_of(round), std::memory_order_release);
}

void RoundCursor::sleep_on_post(int peer, uint32_t wake, Blocker* blocker) const {
  RoundLine& line = group_.of(peer).round_line();
  *blocker = Blocker();
  blocker->word = &line.wake;
  blocker->sleepers = &line.sleepers;
  blocker->seen = wake;
  blocker->peer = peer;
  blocker->peer_cpu = &line.cpu;
}

bool RoundCursor::may_write(uint64_t round, Blocker* blocker) {
  const uint64_t slots = static_cast<uint64_t>(group_.layout().slots());
  if (round - first_ < slots) return true;  // the slot's first use
  // Its previous use was round - slots; a peer that has posted round - slots + 1 is done
  // reading that one.
  const uint64_t needed = round - slots + 2;
  for (int p = 0; p < group_.size(); ++p) {
    if (p != group_.rank() && !reached(p, needed, blocker)) return false;
  }
  return true;
}

void RoundCursor::post() {
  RoundLine& line = group_.self().round_line();
  line.cpu.store(::sched_getcpu(), std::memory_order_relaxed);
  line.posted.store(round_ + 1, std::memory_order_release);
  // Someone sleeps on this rank's posts: those of them asleep on their doorbell (they have
  // point-to-point ops pending too) are rung there. Only on this path, which makes a system
  // call anyway: a post with nobody asleep costs what it did.
  if (publish(line.wake, line.sleepers)) ring_bells_of_sleepers(group_, group_.rank());
}

}  // namespace shm
}  // namespace distcomm
