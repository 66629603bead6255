// Which peers of a gloo group have gone, and whether they closed the group or died.
//
// A connection that closes is a peer that closed the group (destroyed or aborted it) or a
// peer whose process died or exited without doing so; TCP looks the same for both, and
// gloo notices a closed connection only through an operation pending on it. So:
//   - a rank that closes the group with nothing in flight first says goodbye to each peer:
//     one byte on its connection, which arrives before the connection's end (say_goodbye);
//     a rank whose group failed says so the same way before it cuts its connections
//     (say_failed): its end is a consequence, and the peer that went without a word is
//     the loss, also when the board that would say so died with it;
//   - every rank keeps a receive for that byte posted on each connection, and a thread
//     waiting on it, which wakes when a goodbye arrives or a connection closes (gloo fails
//     the pending receive). It then finds which connections are closed (probe: a receive
//     posted on a closed connection throws at once) and reports, once each, the peers that
//     closed theirs without a goodbye (on_lost), unless the connections were closed here
//     (this rank's interrupt, or gloo after one of this rank's waits timed out).
// A connection stays open, though, while any process holds its socket: a child that the peer
// forked after the group was made (a data loader worker, multiprocessing with fork) keeps
// a dead rank's connections open for as long as it runs. So the watch also holds a pidfd of
// every peer in this process's PID and network namespaces with its DISTCOMM_HOST_ID
// (api/plugin/process_watch.h, connect_full_mesh), and a second thread waits on them: a
// peer whose process ended without a goodbye while its connection stays open is lost as
// well (connection_held). Peers on other hosts -- also those that share this kernel but
// not this network namespace (a link between them may be cut, so an open connection says
// nothing of who holds it), or that were given another DISTCOMM_HOST_ID -- are seen only
// through their connections, and the group's timeouts.
// The backend records the group's failure in on_lost, naming the peer: so every survivor
// learns of a death within moments, whatever it is doing -- idle, waiting for another rank,
// or in the middle of a message from the dead one, which gloo itself would not end.
// closed_peers() gives an op whose own wait failed on a closed connection the same answer.
// The watch also keeps the order in which it saw goodbyes and closed connections: a peer
// that closed without a goodbye after another had left cleanly most likely failed because
// of that departure (a collective cannot finish without every rank), so the departure is
// the group's first failure, also where the board that would say so left with that rank
// (the store's host leaving cleanly, at 4 ranks and up).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gloo/transport/unbound_buffer.h>

#include "api/plugin/process_watch.h"
#include "backends/gloo/gloo_interruptible_context.h"

namespace distcomm {
namespace gloo {

struct LostPeer {
  int rank = -1;
  int pid = 0;                   // its process, where the watch knows it (same host), else 0
  bool connection_held = false;  // its process ended, and something still holds its connection open
  int after_departure_of = -1;   // a peer seen to leave cleanly before this one went, else -1
};

struct ClosedPeer {
  int rank = -1;
  bool said_goodbye = false;     // it closed the group with nothing in flight
  bool said_failed = false;      // it cut its connections because its group had failed
  int after_departure_of = -1;   // as LostPeer's (-1 for a peer that said goodbye)
};

class ConnectionWatch {
 public:
  // The peers that closed their connections, or whose processes ended, without a goodbye,
  // in rank order.
  using OnLost = std::function<void(const std::vector<LostPeer>& peers)>;

  // transport: the group's, every pair connected; it must outlive the watch. same_host_pids:
  // by rank, each peer's pid where its process can be watched from here (same PID and
  // network namespaces, same DISTCOMM_HOST_ID), else 0 (connect_full_mesh).
  ConnectionWatch(InterruptibleContext& transport, const std::vector<int>& same_host_pids);
  ~ConnectionWatch();
  ConnectionWatch(const ConnectionWatch&) = delete;
  ConnectionWatch& operator=(const ConnectionWatch&) = delete;

  // Starts the threads ("dc-gloo-conns", and "dc-gloo-pids" where a peer shares this host);
  // on_lost runs on them, never after stop().
  void start(OnLost on_lost);
  // The peers whose connections they closed (not this rank), in rank order, as of now.
  std::vector<ClosedPeer> closed_peers();
  // For an op that failed on the connections of `died`: those, and the peers that went
  // without a word within kTogetherWindow more (connection closed, or process ended on this
  // host), in rank order, as the watch's own first report gathers them.
  std::vector<int> gone_together_with(const std::vector<int>& died);
  // Tells every peer still connected that this rank closes the group with nothing in
  // flight; waits a moment for the bytes to be written. Before the connections close.
  void say_goodbye();
  // Tells every peer still connected that this rank's group failed and it cuts its
  // connections now (what the failure was is on the board); waits briefly for the bytes
  // to be written. Before the connections close.
  void say_failed();
  // Ends the thread. Idempotent.
  void stop();

 private:
  // wait: the last listener has a receive on every connection that was open (else a
  // connection closed meanwhile: look first).
  void loop(bool wait);
  // Finds the connections closed since the last look (mu_ held).
  void probe_locked();
  // What `peer` said before its connection's end: 0 nothing (yet), kGoodbye, kFailed.
  uint8_t farewell_locked(int peer) const;
  bool said_goodbye_locked(int peer) const { return farewell_locked(peer) == kGoodbye; }
  bool said_anything_locked(int peer) const { return farewell_locked(peer) != 0; }
  // Sends `what` (a member: gloo reads it while sending) to every peer still connected,
  // waiting up to `wait` for the bytes to be written.
  void say(const uint8_t* what, std::chrono::milliseconds wait);
  // Stamps, in the order seen, the goodbyes that have arrived since the last look (mu_
  // held); before closures are looked for, since a goodbye arrives before its connection's end.
  void note_goodbyes_locked();
  // The first peer seen to leave cleanly before `peer` was seen gone, or -1 (mu_ held).
  int departed_before_locked(int peer) const;
  // Posts a new receive for goodbyes on every open connection (mu_ held); false when a
  // post found its connection closed meanwhile.
  bool listen_locked();
  // The second thread: waits on the peers' pidfds (and stop_fd_).
  void watch_processes();
  // Peer p's process has ended: lost, unless it said goodbye or was reported already.
  void process_ended(int p);
  // Of several peers whose connections closed at once, those whose processes ended (all of
  // them when any is not on this host, or none has ended).
  std::vector<LostPeer> dead_among(const std::vector<LostPeer>& closed) const;
  // Waits up to `timeout` for stop(); true when stopping.
  bool stopped_within(std::chrono::milliseconds timeout) const;
  // Before the first loss is reported: waits kTogetherWindow, then adds to `lost` the peers
  // gone meanwhile (connection closed without a word, or process ended on this host). Ranks
  // that go together -- a host that goes down, two killed by the OOM killer -- are then
  // named together, so that the survivors can go on without all of them (ProcessGroup::
  // shrink) rather than wait for one the first report left out. False when stopping or
  // when this rank closed the group meanwhile (it reports its own failure).
  bool gather_losses_that_came_together(std::vector<LostPeer>& lost);

  InterruptibleContext& transport_;
  const int rank_;
  const int size_;
  OnLost on_lost_;
  std::mutex mu_;
  // Each listener receives peer p's goodbye at byte p. Kept until the watch is destroyed:
  // a goodbye lands in the oldest listener with a receive posted on its connection.
  std::vector<std::unique_ptr<uint8_t[]>> listener_memory_;
  std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> listeners_;
  std::vector<char> closed_;    // by rank: its connection closed, by that peer
  std::vector<char> reported_;  // by rank: given to on_lost
  bool gathered_once_ = false;  // the first loss waited for others (gather_losses_that_came_together)
  // By rank: when (in events seen, from 1) its goodbye, its connection's end or its
  // process's end was seen; 0: not yet.
  std::vector<uint64_t> left_seen_, gone_seen_;
  uint64_t events_ = 0;
  bool closed_here_ = false;    // this rank's connections were closed by this rank
  bool stopping_ = false;
  static constexpr uint8_t kGoodbye = 1, kFailed = 2;
  uint8_t goodbye_ = kGoodbye;  // what say_goodbye sends (gloo reads it while sending)
  uint8_t failed_ = kFailed;    // what say_failed sends
  std::thread thread_;
  std::vector<ProcessWatch> processes_;  // by rank; watching() for same-host peers
  int stop_fd_ = -1;                     // an eventfd, written by stop()
  std::thread process_thread_;
};

}  // namespace gloo
}  // namespace distcomm
