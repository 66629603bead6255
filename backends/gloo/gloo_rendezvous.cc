#include "backends/gloo/gloo_rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>

#include "api/group/auto_backend.h"
#include "api/errors.h"
#include "api/plugin/process_watch.h"
#include "api/process/thread_start.h"
#include "backends/gloo/gloo_fail_pairs.h"
#include "backends/gloo/gloo_limits.h"

namespace distcomm {
namespace gloo {
namespace {

using std::chrono::milliseconds;

// Enough to overlap the round trips of many connects; a connect that waits for a peer
// that never comes holds its thread, which the deadline frees.
constexpr int kMaxConnectThreads = 8;

// How long a failing rendezvous lets connects under way end before closing its pairs
// (connect_full_mesh): far above a connect's microseconds, small beside a failing init.
constexpr milliseconds kSettleBeforeClosing{250};

// How long a peer whose connection closed may take to be marked ended: its descriptors
// close early in its exit, before the kernel marks it ended (as gloo_connection_watch.cc).
constexpr milliseconds kClosedToEnded{100};

// How long a live peer that closed its connection has to say in the store why (a rank that
// fails says so before it closes its connections, but its store call may be slower than
// the close under load): then its failure, not the closed connection, is the cause.
constexpr milliseconds kPeerSayGrace{1000};

std::string address_key(int rank) { return "addresses/" + std::to_string(rank); }

// What a rank publishes: one pair address per other rank, in rank order, then its process
// ("<process_domain()>\n<pid>", so that a peer of the same domain can watch it: the core's
// process_domain(), auto_backend.h, which the stall watch publishes too), then that text's
// length in 4 bytes.
Store::Bytes published(const std::vector<char>& addresses, const std::string& domain) {
  const std::string process = domain + "\n" + std::to_string(::getpid());
  Store::Bytes out(addresses.begin(), addresses.end());
  out.insert(out.end(), process.begin(), process.end());
  const auto n = static_cast<uint32_t>(process.size());
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<uint8_t>(n >> shift));
  return out;
}

struct Published {
  std::vector<char> address_for_me;
  int same_host_pid = 0;  // the peer's pid where it shares this process's domain (process_domain()), else 0
};

// What `peer` published, read for this rank (whose process_domain() is `domain`).
Published read_published(Store& store, int rank, int size, int peer, const std::string& domain) {
  const Store::Bytes all = store.get(address_key(peer));
  const size_t others = static_cast<size_t>(size - 1);
  uint32_t process_size = 0;
  if (all.size() >= 4) {
    for (int i = 0; i < 4; ++i) process_size |= static_cast<uint32_t>(all[all.size() - 4 + i]) << (8 * i);
  }
  const size_t addresses_size = all.size() >= 4 + size_t{process_size} ? all.size() - 4 - process_size : 0;
  if (addresses_size == 0 || addresses_size % others != 0) {
    throw StoreError("gloo rendezvous: rank " + std::to_string(peer) + " published " + std::to_string(all.size()) +
                     " bytes of addresses, not the " + std::to_string(others) +
                     " addresses and the process this version expects: is it another version of distcomm's gloo "
                     "plugin?");
  }
  Published out;
  const size_t each = addresses_size / others;
  const size_t index = static_cast<size_t>(rank > peer ? rank - 1 : rank);
  out.address_for_me.assign(all.begin() + static_cast<std::ptrdiff_t>(index * each),
                            all.begin() + static_cast<std::ptrdiff_t>((index + 1) * each));
  const std::string process(all.begin() + static_cast<std::ptrdiff_t>(addresses_size), all.end() - 4);
  const size_t newline = process.rfind('\n');
  if (newline != std::string::npos && process.substr(0, newline) == domain) {
    out.same_host_pid = std::atoi(process.c_str() + newline + 1);
  }
  return out;
}

// Connects the pairs to `peers` from up to kMaxConnectThreads threads. Its owner starts
// it (start), waits for it (wait_for), and whatever happens, stop() leaves no thread
// running: also when start() could start only some of its threads.
class Connector {
 public:
  Connector(::gloo::transport::Context& transport, std::vector<int> peers, std::vector<std::vector<char>> addresses)
      : transport_(transport),
        peers_(std::move(peers)),
        addresses_(std::move(addresses)),
        started_(addresses_.size()),
        done_(addresses_.size()),
        failed_(addresses_.size()) {}
  ~Connector() { stop(); }

  // Starts the threads. Not in the constructor: a thread that fails to start (ulimit -u)
  // throws from here with those before it running, and only a constructed Connector's
  // stop() (its owner's, or the destructor's) ends them; a vector of joinable threads
  // destroyed by a throwing constructor would terminate the process. `where` names the
  // rank and group.
  void start(const std::string& where) {
    const int n = std::min<int>(kMaxConnectThreads, static_cast<int>(peers_.size()));
    threads_.reserve(static_cast<size_t>(n));  // no reallocation between a start and its push
    for (int i = 0; i < n; ++i) {
      threads_.push_back(start_thread(where + ": the gloo rendezvous's connects (thread " + std::to_string(i + 1) +
                                          " of " + std::to_string(n) + ")",
                                      [this] { run(); }));
    }
  }

  // Waits up to slice for every pair to connect or one to fail.
  bool wait_for(milliseconds slice) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, slice, [&] { return finished_ == peers_.size() || failed_peer_ >= 0; });
  }

  // Waits up to `bound` for every connect to have ended, connected or not.
  void settle(milliseconds bound) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, bound, [&] { return finished_ == peers_.size(); });
  }

  std::vector<int> not_connected() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int> out;
    for (int p : peers_) {
      if (!done_[static_cast<size_t>(p)]) out.push_back(p);
    }
    return out;
  }

  // The first connect that failed: its peer (-1 if none) and gloo's message.
  int failed_peer(std::string* message) {
    std::lock_guard<std::mutex> lock(mu_);
    *message = failure_;
    return failed_peer_;
  }

  // No new connects; fails every pair while a connect is still blocked (which wakes it),
  // then joins the threads. Not Pair::close(): that resets the connection, and a peer
  // whose gloo loop has just seen that connection complete then asks the kernel for the
  // address of a socket already reset; getpeername fails, gloo's assertion throws on its
  // loop thread, and the peer's process terminates. (A connection still in a listening
  // pair's queue is reset by the kernel when that socket closes, whatever closes it: a
  // failing rendezvous first lets connects under way end, settle().) On success nothing
  // is blocked and nothing is failed.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    for (;;) {
      std::vector<int> blocked;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (int p : peers_) {
          if (started_[static_cast<size_t>(p)] && !done_[static_cast<size_t>(p)]) blocked.push_back(p);
        }
      }
      if (blocked.empty()) break;
      fail_every_pair(transport_, connected_first());
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, milliseconds(50));
    }
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  // The peers, those connected first (fail_every_pair says why).
  std::vector<int> connected_first() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int> out;
    for (int p : peers_) {
      if (done_[static_cast<size_t>(p)] && !failed_[static_cast<size_t>(p)]) out.push_back(p);
    }
    for (int p : peers_) {
      if (!done_[static_cast<size_t>(p)] || failed_[static_cast<size_t>(p)]) out.push_back(p);
    }
    return out;
  }

  void run() {
    for (;;) {
      int peer = -1;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_ || next_ >= peers_.size()) return;
        peer = peers_[next_++];
        started_[static_cast<size_t>(peer)] = 1;
      }
      std::string error;
      try {
        transport_.getPair(peer)->connect(addresses_[static_cast<size_t>(peer)]);
      } catch (const std::exception& e) {
        error = e.what();
      } catch (...) {
        error = "an unknown exception";
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        done_[static_cast<size_t>(peer)] = 1;
        failed_[static_cast<size_t>(peer)] = error.empty() ? 0 : 1;
        ++finished_;
        // After stop() began, failures are of its own closing.
        if (!error.empty() && !stopping_ && failed_peer_ < 0) {
          failed_peer_ = peer;
          failure_ = error;
        }
      }
      cv_.notify_all();
    }
  }

  ::gloo::transport::Context& transport_;
  const std::vector<int> peers_;
  const std::vector<std::vector<char>> addresses_;  // by rank
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char> started_;  // by rank
  std::vector<char> done_;     // by rank
  std::vector<char> failed_;   // by rank: its connect threw
  size_t next_ = 0;
  size_t finished_ = 0;
  bool stopping_ = false;
  int failed_peer_ = -1;
  std::string failure_;
  std::vector<std::thread> threads_;
};

// The address of a new pair to `peer`, listening on its own socket. A socket this process
// cannot open (ulimit -n: one per peer per group) is said as the limit it is.
std::vector<char> listening_pair_address(::gloo::transport::Context& transport, int peer, const std::string& where) {
  try {
    return transport.createPair(peer)->address().bytes();
  } catch (const std::exception& e) {
    auto limit = limit_failure(where + ": gloo cannot open the socket for rank " + std::to_string(peer), e.what());
    if (!limit) throw;
    throw Error(*limit);
  }
}

bool is_refusal(const std::string& gloo_message) {
  return gloo_message.find("Connection refused") != std::string::npos;
}

// Why the connection to `peer` (pid `pid` on this host, 0 if elsewhere or unknown) failed,
// as far as this rank can tell: "its process has gone" only where the kernel says so. A
// peer on this host that still runs closed its end itself (or had it closed for it) during
// the rendezvous; it is given a moment to say why in the store (wait.raise_if_creation_failed).
std::string why_not_connected(int peer, int pid, const std::string& gloo_message, const InitWait& wait,
                              const std::string& refused) {
  const std::string who = "rank " + std::to_string(peer);
  if (pid > 0) {
    const ProcessWatch process(pid);  // pid published in this rendezvous: reused since is unlikely
    if (process.watching()) {
      if (process.ends_within(kClosedToEnded)) {
        return "its process (pid " + std::to_string(pid) + " on this host) has ended since it published its address";
      }
      // A live peer that closed the connection because it failed says so in the store.
      // Never past the creation's deadline: the grace is for the peer's words, not a wait
      // of its own that a short timeout would not bound.
      const auto until = std::min(std::chrono::steady_clock::now() + kPeerSayGrace, wait.deadline);
      do {
        wait.raise_if_creation_failed([&] { return refused; });
        if (process.ends_within(milliseconds(50))) {
          return "its process (pid " + std::to_string(pid) + " on this host) has ended since it published its address";
        }
      } while (std::chrono::steady_clock::now() < until);
      if (is_refusal(gloo_message)) {
        return who + " (pid " + std::to_string(pid) + " on this host) still runs but refused the connection: the "
               "address it published no longer listens";
      }
      return who + " (pid " + std::to_string(pid) + " on this host) still runs, but the connection closed during "
             "the rendezvous and " + who + " has not said why; its own output may say; if this host is heavily "
             "loaded or near its socket limits (see 'netstat -s' for listen queue overflows), start the job again";
    }
  }
  return "its process has gone since it published its address, or it closed the connection, or that address is "
         "not reachable from here (DISTCOMM_SOCKET_IFNAME)";
}

}  // namespace

std::shared_ptr<::gloo::transport::Context> connect_full_mesh(
    const RendezvousContext& context, const std::shared_ptr<::gloo::transport::Device>& device, Store& store,
    const InitWait& wait, std::vector<int>* same_host_pids) {
  const int rank = context.rank;
  const int size = context.size;
  auto device_copy = device;  // gloo's createContext is not const
  std::shared_ptr<::gloo::transport::Context> transport = device_copy->createContext(rank, size);
  transport->setTimeout(context.getTimeout());

  // Each pair listens on its own port from its creation: one address per peer.
  std::vector<char> mine;
  std::vector<int> peers;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    peers.push_back(p);
    const std::vector<char> bytes = listening_pair_address(*transport, p, wait.where);
    mine.insert(mine.end(), bytes.begin(), bytes.end());
  }
  // From here a failure is said before this rank's connections and listening sockets
  // close, so that a peer refused or cut off by their closing finds why in the store.
  std::optional<Connector> connector;
  try {
    const std::string domain = process_domain();
    store.set(address_key(rank), published(mine, domain));

    std::vector<std::string> keys;
    for (int p : peers) keys.push_back(address_key(p));
    wait_for_keys(store, keys, peers, wait, "to publish their gloo addresses",
                  "they have not reached the gloo rendezvous, or are stuck or gone");

    std::vector<std::vector<char>> addresses(static_cast<size_t>(size));
    same_host_pids->assign(static_cast<size_t>(size), 0);
    for (int p : peers) {
      Published theirs = read_published(store, rank, size, p, domain);
      addresses[static_cast<size_t>(p)] = std::move(theirs.address_for_me);
      (*same_host_pids)[static_cast<size_t>(p)] = theirs.same_host_pid;
    }

    connector.emplace(*transport, peers, std::move(addresses));
    connector->start(wait.where);  // on failure, the catch below ends those started
    wait.until(
        "to connect with this rank over gloo", [&](milliseconds slice) { return connector->wait_for(slice); },
        [&] { return connector->not_connected(); },
        "they published addresses and did not connect: they are stuck or gone, or their addresses are not "
        "reachable from here (DISTCOMM_SOCKET_IFNAME)");
    std::string failure;
    const int failed = connector->failed_peer(&failure);
    if (failed >= 0) {
      const std::string refused =
          wait.where + ": the gloo rendezvous cannot connect to rank " + std::to_string(failed) + " (" + failure + ")";
      // A rank that failed its part first said so before closing its end: that failure,
      // not the refusal it caused here, is the cause.
      wait.raise_if_creation_failed([&] { return refused; });
      // Out of descriptors here (accept's EMFILE): this process's limit, not the peer.
      if (auto limit = limit_failure(wait.where + ": the gloo rendezvous cannot connect to rank " +
                                         std::to_string(failed),
                                     failure)) {
        throw Error(*limit);
      }
      throw PeerFailure(refused + ": " +
                        why_not_connected(failed, (*same_host_pids)[static_cast<size_t>(failed)], failure, wait,
                                          refused));
    }
  } catch (...) {
    wait.say_creation_failed(rank, std::current_exception());
    if (connector) {
      // A live peer's connect to one of this rank's listening pairs may be under way (it
      // failed at the same moment, refused by the same gone rank). Closing a listening
      // socket resets a connection still in its queue, and a reset that reaches the peer
      // between its connect completing and its gloo loop asking for the address
      // terminates that process (gloo's assertion on getpeername). Such connects end in
      // microseconds; only those to ranks that never come wait out the bound.
      connector->settle(kSettleBeforeClosing);
      connector->stop();
    }
    throw;
  }
  connector->stop();
  return transport;
}

}  // namespace gloo
}  // namespace distcomm
