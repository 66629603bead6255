#include "backends/gloo/gloo_connection_watch.h"

#include <pthread.h>

#include <gloo/types.h>

#include "backends/gloo/gloo_errors.h"
#include "backends/gloo/gloo_slots.h"

namespace distcomm {
namespace gloo {
namespace {

// The listener's wait has no deadline of its own: it ends when a goodbye arrives, a
// connection closes, or stop(). A gloo wait that times out closes every connection of the
// group, so "no deadline" is a span no job reaches.
constexpr std::chrono::hours kNeverEnds{24 * 365 * 10};
// How long say_goodbye waits for its bytes to be written: at once, unless a peer has not
// posted its listener yet (it posts one as soon as its connections are made).
constexpr std::chrono::milliseconds kGoodbyeWait{1000};

const uint64_t kGoodbyeSlot = ::gloo::Slot::build(kGoodbyeSlotPrefix, 0);
const uint64_t kProbeSlot = ::gloo::Slot::build(kNeverSentSlotPrefix, 1);

}  // namespace

ConnectionWatch::ConnectionWatch(InterruptibleContext& transport)
    : transport_(transport),
      rank_(transport.rank),
      size_(transport.size),
      closed_(static_cast<size_t>(transport.size), 0),
      reported_(static_cast<size_t>(transport.size), 0) {}

ConnectionWatch::~ConnectionWatch() { stop(); }

void ConnectionWatch::start(OnLost on_lost) {
  on_lost_ = std::move(on_lost);
  bool listening = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listening = listen_locked();  // before the thread: a goodbye from now on has a receive to land in
  }
  thread_ = std::thread([this, listening] { loop(listening); });
  pthread_setname_np(thread_.native_handle(), "dc-gloo-conns");
}

void ConnectionWatch::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    // Wakes the thread's wait (or makes its next one return at once).
    if (!listeners_.empty()) listeners_.back()->abortWaitRecv();
  }
  if (thread_.joinable()) thread_.join();
}

void ConnectionWatch::probe_locked() {
  char unused = 0;
  auto probe = transport_.create_unregistered_buffer(&unused, 1);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || closed_[static_cast<size_t>(p)]) continue;
    try {
      // Nobody sends on this slot: on an open connection the receive just stays posted.
      probe->recv(p, kProbeSlot, 0, 1);
    } catch (const std::exception& e) {
      if (closed_by_this_rank(e.what())) {
        closed_here_ = true;
      } else {
        closed_[static_cast<size_t>(p)] = 1;
      }
    }
  }
}

bool ConnectionWatch::said_goodbye_locked(int peer) const {
  // gloo wrote the byte before it took the lock of the connection whose end (or of the
  // listener whose completion) this rank has seen since, under that same lock.
  for (const auto& memory : listener_memory_) {
    if (static_cast<volatile uint8_t*>(memory.get())[peer] != 0) return true;
  }
  return false;
}

bool ConnectionWatch::listen_locked() {
  auto memory = std::make_unique<uint8_t[]>(static_cast<size_t>(size_));  // zeros
  auto listener = transport_.create_unregistered_buffer(memory.get(), static_cast<size_t>(size_));
  bool all_posted = true;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || closed_[static_cast<size_t>(p)]) continue;
    try {
      listener->recv(p, kGoodbyeSlot, static_cast<size_t>(p), 1);
    } catch (const std::exception&) {
      all_posted = false;  // closed since the last probe: the next one says how
    }
  }
  listener_memory_.push_back(std::move(memory));
  listeners_.push_back(std::move(listener));
  return all_posted;
}

std::vector<ClosedPeer> ConnectionWatch::closed_peers() {
  std::lock_guard<std::mutex> lock(mu_);
  probe_locked();
  std::vector<ClosedPeer> out;
  for (int p = 0; p < size_; ++p) {
    if (closed_[static_cast<size_t>(p)]) out.push_back({p, said_goodbye_locked(p)});
  }
  return out;
}

void ConnectionWatch::say_goodbye() {
  auto buffer = transport_.create_unregistered_buffer(&goodbye_, 1);
  int posted = 0;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    try {
      buffer->send(p, kGoodbyeSlot, 0, 1);
      ++posted;
    } catch (const std::exception&) {
      // That connection is closed: nobody there to tell.
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + kGoodbyeWait;
  for (int i = 0; i < posted; ++i) {
    try {
      buffer->waitSend(deadline);
    } catch (const std::exception&) {
      // Timed out: gloo closed every connection, which this rank was about to do anyway.
      // A peer not told takes it for a death; it had not posted its listener, so it had
      // hardly started.
      return;
    }
  }
}

void ConnectionWatch::loop(bool wait) {
  for (;;) {
    if (wait) {
      ::gloo::transport::UnboundBuffer* listener = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
        listener = listeners_.back().get();
      }
      for (;;) {
        try {
          if (!listener->waitRecv(nullptr, kNeverEnds)) return;  // stop()
          // A goodbye arrived (its byte says whose): that peer's end will be harmless.
        } catch (const std::exception&) {
          break;  // a connection closed (gloo failed the listener's receive on it)
        }
      }
    }
    std::vector<int> lost;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      probe_locked();
      // Closed here: the group failed or was shut down on this rank, which reports that.
      if (closed_here_ || transport_.interrupted()) return;
      for (int p = 0; p < size_; ++p) {
        const auto i = static_cast<size_t>(p);
        if (closed_[i] && !reported_[i] && !said_goodbye_locked(p)) {
          reported_[i] = 1;
          lost.push_back(p);
        }
      }
      // The spent listener's receives on the open connections stay posted (a goodbye may
      // land there); the new one is what the thread waits on. A post that finds its
      // connection closed meanwhile means another look before waiting.
      wait = listen_locked();
    }
    if (!lost.empty()) on_lost_(lost);
  }
}

}  // namespace gloo
}  // namespace distcomm
