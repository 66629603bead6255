// How the ranks of a communicator agree on its ncclUniqueId through the group's store.
// No NCCL here: the id is bytes, so the exchange is tested on machines without a GPU.
//
// Keys are fresh per backend: a store can outlive a group (a program that destroys its
// group and makes another one of the same name over the same store), and a rank that read
// the earlier group's id would join a communicator that no longer exists. Each rank
// counts the nccl backends it has made over this store (one store counter per rank), and
// the count is part of every key, so ranks of the second group never see the first's.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "api/store/store.h"

namespace distcomm {
namespace nccl {

// "nccl/<n>/": n is how many nccl backends `rank` had made over `store` before this one.
std::string fresh_key_prefix(Store& store, int rank);

struct UniqueIdExchange {
  Store* store = nullptr;
  std::string key;      // where the root publishes the id
  bool root = false;    // rank 0 of the communicator makes the id
  size_t id_size = 0;   // bytes of an id (NCCL_UNIQUE_ID_BYTES)
  std::string label;    // the communicator, for messages
  int rank = 0, size = 1;
  // Optional: asked after each slice that ended without the id; non-empty when another
  // rank of the group has published its failure (the group's failure board), which ends
  // the wait at once with PeerFailure and that text. How a rank 0 that failed (and
  // published) before it published the id stops costing its peers the whole timeout. A
  // rank 0 killed outright publishes no failure: root_process_key covers that case where it
  // runs on the waiter's host.
  std::function<std::string()> peer_failure;
};

// How often a rank waiting for the id reads the group's failure board. The store wait
// itself is cut into init_wait.h's kWaitSlice (50 ms) slices, the connection left free
// between them, so `aborted` is seen within a slice: 20 requests a second a waiting rank,
// where polling check() every 10 ms made 100.
constexpr std::chrono::milliseconds kAbortCheckInterval{500};

// The root calls make() and publishes its bytes; the others block in the store's wait for
// them, in slices of kWaitSlice so that `aborted` (another thread's abort) ends
// the wait within one slice. When make() throws, the root publishes a failure marker
// under the key (root_failure_marker) and rethrows, and the others throw PeerFailure with
// the root's reason at once instead of waiting out the deadline. Throws Timeout past the
// deadline (a root that died elsewhere, or before it said where it runs), PeerFailure when aborted, Error
// for an id of the wrong size. The root publishes root_process_key(key) first; a waiting
// rank that sees that process end before the id came throws PeerFailure naming rank 0.
Store::Bytes exchange_unique_id(const UniqueIdExchange& x, const std::function<Store::Bytes()>& make,
                                std::chrono::steady_clock::time_point deadline, const std::atomic<bool>& aborted);

// Deletes the communicator's id and the root's process record (root_process_key), once the
// communicator is made: ncclCommInitRank ends on a rank only after every rank joined NCCL's
// bootstrap with the id, so each had read both by then. Only the root deletes (x.root; the
// others return at once): two store requests on one rank, after NCCL's setup, which takes
// far longer, and no rank waits for them. Before, both stayed in the store for the job's
// life, two keys per communicator made (a pair communicator per pair of ranks that
// exchange: n^2 of them for n ranks). Best effort: a store that fails leaves them, and the
// communicator is made all the same (never throws). Keys of a communicator whose setup
// failed stay: a rank may still be reading them.
void forget_unique_id(const UniqueIdExchange& x) noexcept;

// Where the root says where its process runs ("<magic>\n<process_domain()>\n<pid>\n<host>"),
// before it makes the id: a waiting rank in the same domain (auto_backend.h: one host, one
// PID namespace) watches that pid (ProcessWatch) and, when the root's process has ended
// without publishing the id (SIGKILL, the OOM killer, a crash inside ncclGetUniqueId), ends
// at once with a PeerFailure naming rank 0 and its pid, instead of a Timeout at the
// deadline. A root on another host is still found only by the group's board
// (peer_failure) or at the deadline. Declared for tests.
std::string root_process_key(const std::string& key);

// What a root that could not make an id publishes: the reason, in a form never taken for
// an id of id_size bytes. Declared for tests.
Store::Bytes root_failure_marker(const std::string& reason, size_t id_size);

}  // namespace nccl
}  // namespace distcomm
