#include "backends/nccl/unique_id_exchange.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <typeinfo>

#include "api/errors.h"
#include "api/group/init_wait.h"

namespace distcomm {
namespace nccl {
namespace {

// What the root publishes under the key instead of an id when it cannot make one. A
// failed root publishes under the same key as the id so that a peer waits on one key (a
// store wait on two keys waits for both); the marker is told from an id by its prefix
// and by its length, which is kept different from an id's.
constexpr char kRootFailed[] = "distcomm/nccl: the root could not make the ncclUniqueId: ";

bool is_failure_marker(const Store::Bytes& value, size_t id_size) {
  const size_t n = sizeof(kRootFailed) - 1;
  return value.size() != id_size && value.size() >= n && std::memcmp(value.data(), kRootFailed, n) == 0;
}

}  // namespace

std::string fresh_key_prefix(Store& store, int rank) {
  const int64_t made = store.add("nccl/backends_made_by_rank" + std::to_string(rank), 1);
  return "nccl/" + std::to_string(made) + "/";
}

Store::Bytes root_failure_marker(const std::string& reason, size_t id_size) {
  std::string text = kRootFailed + reason;
  if (text.size() == id_size) text += ' ';  // never the length of an id
  return Store::Bytes(text.begin(), text.end());
}

Store::Bytes exchange_unique_id(const UniqueIdExchange& x, const std::function<Store::Bytes()>& make,
                                std::chrono::steady_clock::time_point deadline, const std::atomic<bool>& aborted) {
  using Clock = std::chrono::steady_clock;
  if (x.root) {
    Store::Bytes id;
    try {
      id = make();
    } catch (const std::exception& e) {
      // Without this the peers would wait out the whole timeout (30 minutes by default)
      // and end with a Timeout that hides the cause. Best effort: a store that fails too
      // leaves them that Timeout, and the root's own error is what this rank reports.
      try {
        x.store->set(x.key, root_failure_marker(e.what(), x.id_size));
      } catch (const std::exception&) {
      }
      throw;
    }
    x.store->set(x.key, id);
    return id;
  }
  const auto start = Clock::now();
  auto last_board_look = start;
  const std::string who = "rank " + std::to_string(x.rank) + " of " + std::to_string(x.size);
  // A blocking store wait, not polling check(): a TCPStore wait is one request that the
  // server answers when the key appears, where polling sent one request per rank every
  // few milliseconds for every communicator made (hundreds of thousands a second at
  // thousands of ranks). The wait is cut into slices only to see `aborted` (set by
  // another thread, which has no way to wake a store wait), so a slice is long.
  for (;;) {
    if (aborted) {
      throw PeerFailure(x.label + ": aborted while " + who + " waited for rank 0's ncclUniqueId");
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
      throw Timeout(x.label + ": " + who + " waited " + std::to_string(waited.count()) +
                    " ms for rank 0 to publish the ncclUniqueId (store key '" + x.key +
                    "'); rank 0 may have died or not yet issued its first op on this communicator");
    }
    // At least 1 ms: a store reads a timeout of zero or less as "the store's default".
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                      std::chrono::milliseconds(1);
    // Slices of kWaitSlice with the connection left free between them (init_wait.h): the
    // backend's store shares the group's one TCPStore connection, whose lock is not fair, so
    // back-to-back 500 ms waits held every other store call of this process (heartbeats,
    // failure records, stall-watch looks) for up to a second each (helper-186's review).
    const auto slice = std::max(std::chrono::milliseconds(1), std::min(kWaitSlice, left));
    try {
      x.store->wait({x.key}, slice);
      break;
    } catch (const Timeout& e) {
      // A subclass (a StoreCallDeadline cutting the call short) says the store did not
      // answer: that is this rank's error, not "not yet". So is any other store failure.
      if (typeid(e) != typeid(Timeout)) throw;
    }
    // The slice ended without the key. The board is read every kAbortCheckInterval (a
    // prompt rank 0 costs nothing more).
    if (x.peer_failure && Clock::now() - last_board_look >= kAbortCheckInterval) {
      last_board_look = Clock::now();
      const std::string why = x.peer_failure();
      if (!why.empty()) {
        throw PeerFailure(x.label + ": " + who + " stopped waiting for rank 0's ncclUniqueId: " + why);
      }
    }
    std::this_thread::sleep_for(kStoreLeftFree);
  }
  Store::Bytes id = x.store->get(x.key);
  if (is_failure_marker(id, x.id_size)) {
    const size_t n = sizeof(kRootFailed) - 1;
    throw PeerFailure(x.label + ": " + who + " cannot join: rank 0 could not make the ncclUniqueId: " +
                      std::string(id.begin() + static_cast<std::ptrdiff_t>(n), id.end()));
  }
  if (id.size() != x.id_size) {
    throw Error(x.label + ": the ncclUniqueId under store key '" + x.key + "' has " + std::to_string(id.size()) +
                " bytes, expected " + std::to_string(x.id_size) + " (is another job using the same store?)");
  }
  return id;
}

}  // namespace nccl
}  // namespace distcomm
