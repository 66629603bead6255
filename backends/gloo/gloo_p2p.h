// Point-to-point transfers of a gloo group.
//
// send/recv are posted at once on the calling thread (not queued behind collectives), as
// in c10d: a rank may block in recv() while its peer has queued collectives before the
// matching send, and a queued send would then never go out. gloo matches them by
// (peer, slot) in posting order, and p2p slots never collide with collectives' (gloo_slots.h).
//
// Completion needs a thread to wait on each transfer. One thread waiting on them in order
// would deadlock a correct program (rank 0 waits for its recv to complete before the
// waiter gets to its send, which the peer needs first), so each pending transfer has its
// own waiter, from a pool that grows to the number of transfers in flight and then reuses
// its threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gloo/transport/unbound_buffer.h>

#include "api/tensor.h"
#include "api/work.h"
#include "api/diagnostics/group_failure.h"
#include "backends/gloo/gloo_connection_watch.h"

namespace distcomm {
namespace gloo {

struct Transfer {
  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;  // already posted
  WorkPtr work;
  Tensor tensor;  // keeps owned storage alive until the transfer ends
  bool is_send = false;
  int peer = -1;  // the rank it exchanges with; -1: a recv from any source
  std::chrono::milliseconds timeout{0};     // the op's own, as its errors name it
  std::chrono::milliseconds wait_limit{0};  // gloo's wait (GlooOp::wait_limit)
};

class TransferWaiters {
 public:
  // connections: the group's (null in a group of one), which names a peer that closed its
  // connection when a transfer fails on it.
  TransferWaiters(GroupFailure& failure, ConnectionWatch* connections)
      : failure_(failure), connections_(connections) {}
  ~TransferWaiters();
  TransferWaiters(const TransferWaiters&) = delete;
  TransferWaiters& operator=(const TransferWaiters&) = delete;

  // Waits for t on a pool thread and finishes its Work (set_source_rank for receives).
  void add(std::unique_ptr<Transfer> t);
  bool busy() const;
  // A transfer in flight (posted, not finished), null if none; its peer (Transfer::peer)
  // in *peer when given.
  WorkPtr in_flight(int* peer = nullptr) const;
  // Makes every pending wait return; those Works fail with the group's refusal. Receives
  // from any source wait on no connection, so cutting the connections alone would not
  // end them.
  void abort_all();
  // abort_all(), then joins the threads; later add()s are refused at once. Idempotent.
  // From a Work callback on a waiter thread (the group aborted or destroyed as a transfer
  // ends) that thread is left to end on its own, and what is queued ends here.
  void stop();

 private:
  void loop();
  // Waits for t (taken from the queue into waiting_) and finishes its Work.
  void wait_and_finish(std::unique_ptr<Transfer> t);
  void abort_locked(Transfer& t);
  // Starts one more waiter thread; the failure (ulimit -u) as an Error, null on success.
  std::exception_ptr start_waiter_locked();

  GroupFailure& failure_;
  ConnectionWatch* const connections_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Transfer>> queue_;
  std::set<Transfer*> waiting_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace gloo
}  // namespace distcomm
