#include "backends/nccl/unique_id_exchange.h"

#include <unistd.h>

#include <cstring>
#include <optional>
#include <sstream>

#include "api/errors.h"
#include "api/group/auto_backend.h"  // process_domain
#include "api/group/sliced_store_wait.h"
#include "api/plugin/process_watch.h"

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

std::string root_process_key(const std::string& key) { return key + "/root_process"; }

namespace {

constexpr char kRootProcessMagic[] = "distcomm-nccl-root-v1";

std::string this_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Where the root's process runs, as a waiting rank reads it under root_process_key.
struct RootProcess {
  std::string domain;  // process_domain() (auto_backend.h): where its pid names it
  int pid = 0;
  std::string host;    // for messages

  std::string encode() const {
    return std::string(kRootProcessMagic) + "\n" + domain + "\n" + std::to_string(pid) + "\n" + host;
  }
  static std::optional<RootProcess> decode(const std::string& text) {
    std::istringstream in(text);
    std::string magic, pid;
    RootProcess p;
    std::getline(in, magic);
    std::getline(in, p.domain);
    std::getline(in, pid);
    std::getline(in, p.host);
    if (magic != kRootProcessMagic || pid.empty()) return std::nullopt;
    try {
      p.pid = std::stoi(pid);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return p;
  }
};

// A waiting rank's watch on the root's process: read from the store (once it is there),
// then asked of the kernel at every look. Only where the root runs in this process's
// domain (one host, one PID namespace): elsewhere its pid says nothing here, and a root
// killed there is still found only by the group's board or at the deadline.
class RootWatch {
 public:
  // Reads the root's publication while it is not known yet (one request).
  void read(Store& store, const std::string& key) {
    if (known_) return;
    const std::vector<std::optional<Store::Bytes>> v = read_present(store, {root_process_key(key)});
    if (v.empty() || !v[0]) return;
    known_ = true;
    const std::optional<RootProcess> p = RootProcess::decode(to_string(*v[0]));
    if (!p || p->pid <= 0 || p->domain.empty() || p->domain != process_domain()) return;
    root_ = *p;
    watch_ = ProcessWatch(p->pid);
  }
  // "rank 0 (pid 123 on host 'a')" when its process has ended, else "".
  std::string ended() const {
    if (!watch_.watching() || !watch_.ended()) return "";
    return "rank 0 (pid " + std::to_string(root_.pid) + " on host '" + root_.host + "')";
  }

 private:
  bool known_ = false;
  RootProcess root_;
  ProcessWatch watch_;
};

}  // namespace

Store::Bytes exchange_unique_id(const UniqueIdExchange& x, const std::function<Store::Bytes()>& make,
                                std::chrono::steady_clock::time_point deadline, const std::atomic<bool>& aborted) {
  using Clock = std::chrono::steady_clock;
  if (x.root) {
    // Before the id is made (ncclGetUniqueId may take long: it starts NCCL's bootstrap
    // thread): a root killed from here on is seen gone by its peers on this host.
    RootProcess me;
    me.domain = process_domain();
    me.pid = static_cast<int>(::getpid());
    me.host = this_host();
    x.store->set(root_process_key(x.key), me.encode());
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
  const std::string who = "rank " + std::to_string(x.rank) + " of " + std::to_string(x.size);
  auto raise_if_aborted = [&] {
    if (aborted) throw PeerFailure(x.label + ": aborted while " + who + " waited for rank 0's ncclUniqueId");
  };
  raise_if_aborted();
  // A blocking store wait, not polling check(): a TCPStore wait is one request that the
  // server answers when the key appears, where polling sent one request per rank every
  // few milliseconds for every communicator made (hundreds of thousands a second at
  // thousands of ranks). It is cut into SlicedStoreWait's slices (kWaitSlice), with the
  // connection left free between them: the backend's store shares the group's one TCPStore
  // connection, whose lock is not fair, so back-to-back 500 ms waits held every other store
  // call of this process (heartbeats, failure records, stall-watch looks) for up to a
  // second each (helper-186's review). After every slice without the key, `aborted` (set
  // by another thread, which has no way to wake a store wait) and the root's process (a
  // poll of its pidfd); every kAbortCheckInterval, the group's board and, until it is
  // there, where the root runs: a prompt rank 0 costs nothing more.
  RootWatch root;
  Clock::time_point next_board_look = Clock::now() + kAbortCheckInterval;
  SlicedStoreWait wait(*x.store, {x.key}, "rank 0's ncclUniqueId (store key '" + x.key + "')");
  wait.look_every(std::chrono::milliseconds::zero(), [&] {
    raise_if_aborted();
    if (Clock::now() >= next_board_look) {
      next_board_look = Clock::now() + kAbortCheckInterval;
      if (x.peer_failure) {
        const std::string why = x.peer_failure();
        if (!why.empty()) {
          throw PeerFailure(x.label + ": " + who + " stopped waiting for rank 0's ncclUniqueId: " + why);
        }
      }
      root.read(*x.store, x.key);
    }
    const std::string gone = root.ended();
    // A root that published the id between the slice and this look and ended after (a
    // crash later in its setup) has done its part here: the next slice reads the id.
    if (!gone.empty() && !x.store->check({x.key})) {
      throw PeerFailure(x.label + ": " + who + " stopped waiting for rank 0's ncclUniqueId: " + gone +
                        " has ended before it published the id (killed, or it crashed); it is this communicator's "
                        "root, so no rank of it can be set up");
    }
  });
  // One more millisecond: the deadline's own instant still sees an id already there.
  if (!wait.wait_until(deadline + std::chrono::milliseconds(1))) {
    throw Timeout(x.label + ": " + who + " waited " + std::to_string(wait.waited().count()) +
                  " ms for rank 0 to publish the ncclUniqueId (store key '" + x.key +
                  "'); rank 0 may have died or not yet issued its first op on this communicator");
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

void forget_unique_id(const UniqueIdExchange& x) noexcept {
  if (!x.root || !x.store) return;
  for (const std::string& key : {x.key, root_process_key(x.key)}) {
    try {
      x.store->delete_key(key);
    } catch (const std::exception&) {
      // The store is gone or failing: the key stays, as it always did; the communicator works.
    }
  }
}

}  // namespace nccl
}  // namespace distcomm
