// SlicedStoreWait: the one way the core and its backends wait for keys of a store while
// looking out for a failure that means they will never come.
//
// A store's blocking wait (TCPStore: one WAIT request, answered when the last key comes)
// cannot be woken by another thread, and it holds the store's one connection for as long
// as it lasts. So a wait that must also see a failure -- a rank's published error, a peer
// process gone, an abort by another thread -- waits in slices (kWaitSlice, init_wait.h),
// leaves the connection free for kStoreLeftFree after each slice that ended without the
// keys (the connection's mutex is not fair to a thread that lets go and takes it again at
// once, and the threads that would publish the failure use that connection), and between
// slices runs the caller's look, which throws to end the wait. Before this class the group
// creation's waits, the host exchange, shm's rendezvous and nccl's ncclUniqueId exchange
// each had their own loop, with their own slices and their own rules for which Timeout
// means "not yet"; this is the rule for all of them:
//   - a plain Timeout from the store's wait is "not yet";
//   - a subclass of Timeout (the creation's store deadline cutting the call short,
//     store/internal/call_deadline.h) and every other error pass to the caller, whose
//     words say what the store's failure means there (InitWait's waits take a call not
//     made for lack of time as "not yet": init_wait.cc).
//
// Header-only, like plugin/process_watch.h: the plugins (shm, nccl) use it without a new
// core symbol, which they could reference only weakly (api/plugin/plugin.h: a rebuilt
// plugin must still load in an older core).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <typeinfo>
#include <utility>
#include <vector>

#include "api/errors.h"
#include "api/group/init_wait.h"  // kWaitSlice, kStoreLeftFree
#include "api/store/store.h"

namespace distcomm {

class SlicedStoreWait {
 public:
  using Clock = std::chrono::steady_clock;

  // Waits for every one of `keys` in `store` (which must outlive this). `awaited` says
  // what they are, as the object of "waiting for": "rank 0's ncclUniqueId (store key
  // 'nccl/1/comm0/unique_id')"; wait_by's Timeout ends with it.
  SlicedStoreWait(Store& store, std::vector<std::string> keys, std::string awaited)
      : store_(store), keys_(std::move(keys)), awaited_(std::move(awaited)), started_(Clock::now()) {}

  // The longest single wait of the store (kWaitSlice unless set), and how long the
  // connection is left free after each that ended without the keys (kStoreLeftFree). A
  // wait with no look between slices may take its whole span at once (slices(span, 0ms)):
  // fewer requests.
  SlicedStoreWait& slices(std::chrono::milliseconds slice, std::chrono::milliseconds left_free = kStoreLeftFree) {
    slice_ = std::max(std::chrono::milliseconds(1), slice);
    left_free_ = std::max(std::chrono::milliseconds::zero(), left_free);
    return *this;
  }

  // `look` runs after a slice that ended without the keys, at most once every `every`
  // (zero: after every such slice), the first time `every` after this object was made; it
  // throws to end the wait (a failure it found). With when_done it runs once more after the
  // keys have come: what came may itself doom what follows (new_group's lists).
  SlicedStoreWait& look_every(std::chrono::milliseconds every, std::function<void()> look, bool when_done = false) {
    look_every_ = std::max(std::chrono::milliseconds::zero(), every);
    look_ = std::move(look);
    look_when_done_ = when_done;
    next_look_ = started_ + look_every_;
    return *this;
  }

  // Waits until every key exists (true) or `until` has passed (false); at least one wait
  // of the store, of a millisecond or more, so that keys already there are seen even past
  // `until`. May be called again (InitWait::until's polls): the looks keep their pace.
  bool wait_until(Clock::time_point until) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      // At least a millisecond: a store reads a timeout of zero or less as "its default".
      const auto slice = std::max(std::chrono::milliseconds(1), std::min(slice_, left));
      try {
        store_.wait(keys_, slice);
        if (look_ && look_when_done_) look_();
        return true;
      } catch (const Timeout& e) {
        // The server's "not yet" is a plain Timeout; a subclass is some other failure.
        if (typeid(e) != typeid(Timeout)) throw;
      }
      if (look_ && Clock::now() >= next_look_) {
        look_();
        next_look_ = Clock::now() + look_every_;
      }
      if (Clock::now() >= until) return false;
      if (left_free_ > std::chrono::milliseconds::zero()) std::this_thread::sleep_for(left_free_);
    }
  }

  // Waits until every key exists; past `deadline` throws Timeout "timed out after 1200 ms
  // (of 1200 ms) waiting for <awaited>".
  void wait_by(Clock::time_point deadline) {
    if (wait_until(deadline)) return;
    throw Timeout("timed out after " + std::to_string(waited().count()) + " ms (of " +
                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - started_).count()) +
                  " ms) waiting for " + awaited_);
  }

  // Since this object was made.
  std::chrono::milliseconds waited() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_);
  }

 private:
  Store& store_;
  const std::vector<std::string> keys_;
  const std::string awaited_;
  const Clock::time_point started_;
  std::chrono::milliseconds slice_ = kWaitSlice;
  std::chrono::milliseconds left_free_ = kStoreLeftFree;
  std::chrono::milliseconds look_every_{0};
  std::function<void()> look_;
  bool look_when_done_ = false;
  Clock::time_point next_look_{};
};

}  // namespace distcomm
