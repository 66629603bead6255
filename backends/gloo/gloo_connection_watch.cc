#include "backends/gloo/gloo_connection_watch.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <gloo/types.h>

#include "api/process/thread_start.h"
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
// The same for a failed group's word: an abort must not wait long on a peer.
constexpr std::chrono::milliseconds kFailedWait{100};

// How long a peer whose process ended has to be seen the usual way -- its goodbye, or its
// connection's end -- before the process thread calls it lost: its descriptors were closed
// before the kernel marked it ended, so both are normally under way already.
constexpr std::chrono::milliseconds kProcessEndGrace{200};

// How long a peer whose connection closed may take to be marked ended, if it died.
constexpr std::chrono::milliseconds kClosedToEnded{50};
// How long the first loss waits for others that came with it (gather_losses_that_came_
// together): the connections of a host's ranks close within milliseconds of each other;
// a loss is still named well within the second the fault suite allows.
constexpr std::chrono::milliseconds kTogetherWindow{100};

const uint64_t kGoodbyeSlot = ::gloo::Slot::build(kGoodbyeSlotPrefix, 0);
const uint64_t kProbeSlot = ::gloo::Slot::build(kNeverSentSlotPrefix, 1);

}  // namespace

ConnectionWatch::ConnectionWatch(InterruptibleContext& transport, const std::vector<int>& same_host_pids)
    : transport_(transport),
      rank_(transport.rank),
      size_(transport.size),
      closed_(static_cast<size_t>(transport.size), 0),
      reported_(static_cast<size_t>(transport.size), 0),
      left_seen_(static_cast<size_t>(transport.size), 0),
      gone_seen_(static_cast<size_t>(transport.size), 0),
      processes_(static_cast<size_t>(transport.size)) {
  for (int p = 0; p < size_ && p < static_cast<int>(same_host_pids.size()); ++p) {
    const int pid = same_host_pids[static_cast<size_t>(p)];
    if (p != rank_ && pid > 0) processes_[static_cast<size_t>(p)] = ProcessWatch(pid);
  }
}

ConnectionWatch::~ConnectionWatch() {
  stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void ConnectionWatch::start(OnLost on_lost) {
  on_lost_ = std::move(on_lost);
  bool listening = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listening = listen_locked();  // before the thread: a goodbye from now on has a receive to land in
  }
  // A thread that cannot start (ulimit -u) throws an Error naming it; stop() (the
  // destructor's) joins whichever did start.
  thread_ = start_thread("gloo's connection watch (dc-gloo-conns)", [this, listening] { loop(listening); });
  pthread_setname_np(thread_.native_handle(), "dc-gloo-conns");
  const bool same_host_peer =
      std::any_of(processes_.begin(), processes_.end(), [](const ProcessWatch& w) { return w.watching(); });
  if (same_host_peer && (stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) >= 0) {
    process_thread_ = start_thread("gloo's watch of same-host peers (dc-gloo-pids)", [this] { watch_processes(); });
    pthread_setname_np(process_thread_.native_handle(), "dc-gloo-pids");
  }
}

void ConnectionWatch::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    // Wakes the thread's wait (or makes its next one return at once).
    if (!listeners_.empty()) listeners_.back()->abortWaitRecv();
  }
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  if (process_thread_.joinable()) process_thread_.join();
}

bool ConnectionWatch::stopped_within(std::chrono::milliseconds timeout) const {
  pollfd p{stop_fd_, POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

void ConnectionWatch::watch_processes() {
  std::vector<char> ended(static_cast<size_t>(size_), 0);
  for (;;) {
    std::vector<pollfd> fds{pollfd{stop_fd_, POLLIN, 0}};
    std::vector<int> ranks{-1};
    std::vector<int> newly_ended;
    for (int p = 0; p < size_; ++p) {
      const ProcessWatch& w = processes_[static_cast<size_t>(p)];
      if (ended[static_cast<size_t>(p)] || !w.watching()) continue;
      if (w.fd() < 0) {
        newly_ended.push_back(p);  // it had ended before the watch began
      } else {
        fds.push_back(pollfd{w.fd(), POLLIN, 0});
        ranks.push_back(p);
      }
    }
    if (newly_ended.empty()) {
      if (fds.size() == 1) return;  // every peer on this host has ended
      int n;
      do {
        n = ::poll(fds.data(), fds.size(), -1);
      } while (n < 0 && errno == EINTR);
      if (n < 0 || fds[0].revents != 0) return;  // stop()
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP)) newly_ended.push_back(ranks[i]);
      }
    }
    if (stopped_within(kProcessEndGrace)) return;
    for (int p : newly_ended) {
      ended[static_cast<size_t>(p)] = 1;
      process_ended(p);
    }
  }
}

std::vector<LostPeer> ConnectionWatch::dead_among(const std::vector<LostPeer>& closed) const {
  // Peers close their connections when they fail (the abort after a peer's death), so a
  // slow look may find the dead rank's connection and a survivor's closed at once. Where
  // every one of them is on this host, those whose processes still run are not the loss.
  std::vector<LostPeer> dead;
  for (const LostPeer& l : closed) {
    const ProcessWatch& w = processes_[static_cast<size_t>(l.rank)];
    if (!w.watching()) return closed;
    // A dead peer's descriptors close just before the kernel marks it ended.
    if (w.ends_within(kClosedToEnded)) dead.push_back(l);
  }
  return dead.empty() ? closed : dead;
}

void ConnectionWatch::process_ended(int p) {
  std::vector<LostPeer> lost;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    probe_locked();
    if (closed_here_ || transport_.interrupted()) return;  // this rank reports its own failure
    const auto i = static_cast<size_t>(p);
    if (reported_[i] || said_anything_locked(p)) return;
    reported_[i] = 1;
    if (gone_seen_[i] == 0) gone_seen_[i] = ++events_;
    lost.push_back(LostPeer{p, processes_[i].pid(), !closed_[i], departed_before_locked(p)});
  }
  if (!gather_losses_that_came_together(lost)) return;
  on_lost_(lost);
}

std::vector<int> ConnectionWatch::gone_together_with(const std::vector<int>& died) {
  std::vector<int> gone = died;
  if (stopped_within(kTogetherWindow)) return gone;
  std::lock_guard<std::mutex> lock(mu_);
  probe_locked();
  for (int p = 0; p < size_; ++p) {
    const auto i = static_cast<size_t>(p);
    if (p == rank_ || said_anything_locked(p) || std::find(gone.begin(), gone.end(), p) != gone.end()) continue;
    if (closed_[i] || (processes_[i].watching() && processes_[i].ended())) gone.push_back(p);
  }
  std::sort(gone.begin(), gone.end());
  return gone;
}

bool ConnectionWatch::gather_losses_that_came_together(std::vector<LostPeer>& lost) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Only the first report waits: the group has failed by the next one.
    if (gathered_once_) return true;
    gathered_once_ = true;
  }
  if (stopped_within(kTogetherWindow)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  probe_locked();
  if (closed_here_ || transport_.interrupted()) return false;
  for (int p = 0; p < size_; ++p) {
    const auto i = static_cast<size_t>(p);
    if (reported_[i] || said_anything_locked(p)) continue;
    const bool ended = processes_[i].watching() && processes_[i].ended();
    if (!closed_[i] && !ended) continue;
    reported_[i] = 1;
    if (gone_seen_[i] == 0) gone_seen_[i] = ++events_;
    lost.push_back(LostPeer{p, processes_[i].pid(), !closed_[i], departed_before_locked(p)});
  }
  std::sort(lost.begin(), lost.end(), [](const LostPeer& a, const LostPeer& b) { return a.rank < b.rank; });
  return true;
}

void ConnectionWatch::note_goodbyes_locked() {
  for (int p = 0; p < size_; ++p) {
    if (left_seen_[static_cast<size_t>(p)] == 0 && said_goodbye_locked(p)) left_seen_[static_cast<size_t>(p)] = ++events_;
  }
}

int ConnectionWatch::departed_before_locked(int peer) const {
  const uint64_t gone = gone_seen_[static_cast<size_t>(peer)];
  int first = -1;
  for (int p = 0; p < size_; ++p) {
    const uint64_t left = left_seen_[static_cast<size_t>(p)];
    if (left != 0 && left < gone && (first < 0 || left < left_seen_[static_cast<size_t>(first)])) first = p;
  }
  return first;
}

void ConnectionWatch::probe_locked() {
  note_goodbyes_locked();
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
        gone_seen_[static_cast<size_t>(p)] = ++events_;
      }
    }
  }
}

// Not instrumented by ThreadSanitizer: it reads bytes that the kernel's recv() may be
// filling at that moment, on gloo's thread, for a receive still posted (a spent listener's
// stay posted, and a completion does not say which peer's it was: gloo keeps only the last
// rank). That is polling memory another writer fills, as one reads shared memory: a byte
// is read whole, as 0 (nothing yet) or as what the peer said, and the next look sees a
// byte that lands later. gloo offers no way to ask per peer without a wait whose timeout
// closes every connection (UnboundBuffer::waitRecv), so the reads stay and TSan is told.
__attribute__((no_sanitize("thread"))) uint8_t ConnectionWatch::farewell_locked(int peer) const {
  for (const auto& memory : listener_memory_) {
    const uint8_t said = static_cast<volatile uint8_t*>(memory.get())[peer];
    if (said != 0) return said;
  }
  return 0;
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
    if (!closed_[static_cast<size_t>(p)]) continue;
    const bool goodbye = said_goodbye_locked(p);
    const bool failed = farewell_locked(p) == kFailed;
    out.push_back({p, goodbye, failed, goodbye || failed ? -1 : departed_before_locked(p)});
  }
  return out;
}

void ConnectionWatch::say_goodbye() { say(&goodbye_, kGoodbyeWait); }

void ConnectionWatch::say_failed() { say(&failed_, kFailedWait); }

void ConnectionWatch::say(const uint8_t* what, std::chrono::milliseconds wait) {
  // Not to peers that have said their own word or closed their connection: they listen no
  // more, and such a send could stay pending in gloo until `wait` ran out. A clean 4-rank
  // job (examples/all_reduce) took 1 s longer to end in 7 runs of 150; with this, in 1 of 734.
  // Which gloo path leaves it pending is not pinned down: a peer that had exited before the
  // send did not (gloo fails that send at once).
  std::vector<char> skip(static_cast<size_t>(size_), 0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    probe_locked();
    for (int p = 0; p < size_; ++p) skip[static_cast<size_t>(p)] = closed_[static_cast<size_t>(p)] || said_anything_locked(p);
  }
  auto buffer = transport_.create_unregistered_buffer(const_cast<uint8_t*>(what), 1);
  int posted = 0;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || skip[static_cast<size_t>(p)]) continue;
    try {
      buffer->send(p, kGoodbyeSlot, 0, 1);
      ++posted;
    } catch (const std::exception&) {
      // That connection is closed: nobody there to tell.
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
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
          // A goodbye arrived (its byte says whose): that peer's end is no death. Its
          // place in the order tells whether a later end without one followed from it.
          std::lock_guard<std::mutex> lock(mu_);
          note_goodbyes_locked();
        } catch (const std::exception&) {
          break;  // a connection closed (gloo failed the listener's receive on it)
        }
      }
    }
    std::vector<LostPeer> lost;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      probe_locked();
      // Closed here: the group failed or was shut down on this rank, which reports that.
      if (closed_here_ || transport_.interrupted()) return;
      for (int p = 0; p < size_; ++p) {
        const auto i = static_cast<size_t>(p);
        if (closed_[i] && !reported_[i] && !said_anything_locked(p)) {
          reported_[i] = 1;
          lost.push_back(LostPeer{p, processes_[i].pid(), false, departed_before_locked(p)});
        }
      }
      // The spent listener's receives on the open connections stay posted (a goodbye may
      // land there); the new one is what the thread waits on. A post that finds its
      // connection closed meanwhile means another look before waiting.
      wait = listen_locked();
    }
    if (!lost.empty() && !gather_losses_that_came_together(lost)) return;
    if (lost.size() > 1) lost = dead_among(lost);
    if (!lost.empty()) on_lost_(lost);
  }
}

}  // namespace gloo
}  // namespace distcomm
