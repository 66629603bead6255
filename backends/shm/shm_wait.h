// How a rank waits for its peers: spin, then yield, then sleep on a futex in shared memory.
//
// Spinning answers within a cache-line transfer but burns the core; yielding lets another
// runnable thread of this core go first; sleeping frees the core entirely and is what lets a
// group with more ranks than cores progress. Whoever changes a word a peer may sleep on
// bumps it and wakes sleepers (publish), so a sleeper wakes as soon as there is news; the
// sleep is still cut into slices so the waiter can check deadlines and dead peers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace distcomm {
namespace shm {

// Bumps a futex word and wakes whoever sleeps on it. `sleepers` counts them, so that a
// post with nobody asleep costs no system call. Says whether there were any.
bool publish(std::atomic<uint32_t>& word, const std::atomic<uint32_t>& sleepers);
// Wakes every sleeper on `word` unconditionally (state changes: failure, close).
void wake_all(std::atomic<uint32_t>& word);

// What a waiter would sleep on: a futex word and its value read *before* the awaited
// condition was found false, so that a change in between makes the sleep return at once.
struct Blocker {
  std::atomic<uint32_t>* word = nullptr;
  std::atomic<uint32_t>* sleepers = nullptr;
  uint32_t seen = 0;
  int peer = -1;  // the rank waited for, when there is one
  const std::atomic<int32_t>* peer_cpu = nullptr;  // the core that rank last posted from
  // What a spinning waiter watches instead of `word`, when set: a word that changes before
  // `word` does (an inline line's tag, written before the post).
  const std::atomic<uint64_t>* spin_word = nullptr;
  uint64_t spin_seen = 0;
  // Set when point-to-point ops are pending too: this rank's doorbell (read before the
  // poll, as `seen` was), which the waiter sleeps on instead of `word`, having asked `peer`
  // (bell_round_of = peer + 1, and a sleeper on `word`) to ring it at its next post. Without
  // it a recv would sleep on a collective peer's word that no chunk ever changes.
  std::atomic<uint32_t>* bell = nullptr;
  std::atomic<uint32_t>* bell_sleepers = nullptr;
  std::atomic<int32_t>* bell_round_of = nullptr;
  uint32_t bell_seen = 0;
};

struct WaitPolicy {
  std::chrono::nanoseconds spin{0};
  std::chrono::nanoseconds yield{0};
};

// One wait's state. Call idle() after each attempt that made no progress and reset() after
// one that did. Spinning only pays while the awaited rank runs on another core: when it
// last posted from this waiter's core, the waiter yields at once instead (on a loaded host
// the scheduler often puts two ranks on one core, and a spin there only delays the rank
// it waits for).
class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Backoff(const WaitPolicy& policy) : policy_(policy) {}

  void reset() { idle_since_valid_ = false; }
  // Spins on the blocker's word until it changes (for at most a few pauses), yields, or
  // sleeps on it for at most max_sleep. `now`: the caller's latest look at the clock (this
  // is called between polls, and a clock read costs as much as a poll here).
  void idle(const Blocker& blocker, Clock::time_point now, std::chrono::nanoseconds max_sleep);
  // Whether idle() has reached its sleeping phase (the caller then checks liveness).
  bool sleeping() const { return sleeping_; }

 private:
  // Sleeps on the doorbell while also waiting for a peer's post (Blocker::bell).
  static void sleep_on_bell(const Blocker& blocker, std::chrono::nanoseconds max_sleep);

  const WaitPolicy policy_;
  Clock::time_point idle_since_;
  bool idle_since_valid_ = false;
  bool sleeping_ = false;
};

}  // namespace shm
}  // namespace distcomm
