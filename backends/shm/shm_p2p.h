// send / recv / recv_any_source through per-pair rings.
//
// Each rank's segment holds, for every destination, a ring of `depth` chunks. A message
// goes as one or more chunks (tag, message size, offset); the sender publishes them by
// advancing its out_head for that destination, the receiver frees them by advancing its
// in_tail for that source, and each rings the other's doorbell so a sleeping side wakes.
// Messages between two ranks stay in order. A message nobody has posted a receive for yet
// is copied out to private memory ("unexpected"), so it never blocks the ones behind it;
// a later receive takes it from there, as MPI does. A send completes once its last chunk is
// in the ring (the caller's buffer is then free). A receive of another size or dtype than
// its message refuses it, but still consumes (drains, copying nothing) every chunk of it
// before it ends with that error: a message larger than the ring then reaches its end, so
// the send completes at any size and the pair's stream goes on with the next message.
//
// Cost: a program may keep thousands of transfers outstanding. Matching a message to its
// receive, a receive to a kept message, and the engine's periodic look at deadlines and
// peers cost O(log n) or O(ranks), never a walk over the outstanding requests (that walk,
// with a liveness system call per request, made a batch of n transfers cost O(n^2)). Only a
// look that finds something wrong (a deadline passed, a peer gone) walks them all, once,
// to name the request that fails, in the order it always did.
//
// Not thread-safe: the engine calls it under its progress lock.
#pragma once

#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/tensor.h"
#include "api/work.h"
#include "backends/shm/shm_group.h"
#include "backends/shm/shm_wait.h"

namespace distcomm {
namespace shm {

using Clock = std::chrono::steady_clock;

struct P2PRequest {
  WorkPtr work;
  Tensor tensor;  // keeps owned memory alive until the request ends
  uint8_t* data = nullptr;
  uint64_t bytes = 0;
  DType dtype = DType::kFloat32;  // a send's travels with it; a recv takes only its own
  int peer = -1;  // destination of a send, source of a recv; -1: any source
  int tag = 0;
  bool is_send = false;
  std::chrono::milliseconds timeout{0};
  Clock::time_point deadline;
  uint64_t done = 0;  // bytes moved so far
  bool started = false;  // a send has published its first chunk
  uint64_t posted = 0;  // a receive: its number in posting order (which one a message takes)
};

// A request that ended: its Work, its error (null on success), the sender (receives).
struct Completion {
  WorkPtr work;
  std::exception_ptr error;
  int source = -1;
};

class PointToPoint {
 public:
  explicit PointToPoint(const MappedGroup& group);

  // A receive may end at once, taking an unexpected message.
  void add(P2PRequest request, std::vector<Completion>& done);
  bool idle() const;
  // Moves every chunk that can move now. Returns whether anything moved.
  bool progress(std::vector<Completion>& done);
  // This rank's doorbell, as read at the start of the last progress().
  Blocker blocker() const { return blocker_; }
  // Throws GroupFailedError when a request's deadline has passed or a rank it needs has
  // failed, closed, or (check_liveness) died. Also keeps the oldest waiting receive's wait
  // note up to date (note_held_messages).
  void check(Clock::time_point now, bool check_liveness);
  Clock::time_point next_deadline() const;
  // The sends that completed (their message is in the ring) but that no receive of their
  // destination has taken: one text each, "send p2p#0 to rank 1 (tag 0, 32 bytes)". Read
  // from the destinations' segments (Counter::taken); by count, in issue order: exact when
  // the destination receives a pair's messages in order (tags matched out of order may
  // name another of the pair's sends). For the destroy's warning (Engine::shutdown).
  std::vector<std::string> sends_not_taken() const;
  // Whether some destination still may take a sent message: not all taken, and that rank
  // still active (not closed or failed).
  bool sends_awaited() const;
  // Ends every request with error_for(its Work).
  void fail_all(const std::function<std::exception_ptr(const Work&)>& error_for, std::vector<Completion>& done);

  // Process-wide count of the entries that matching and checking examined (index fronts,
  // sources, requests walked): linear in the messages, whatever the number outstanding. For
  // a test that must catch a return to per-message scans by counting, not by timing; also
  // exported as distcomm_shm_p2p_scan_steps() (shm_p2p.cc).
  static uint64_t scan_steps();

 private:
  struct Unexpected {
    int tag = 0;
    uint64_t bytes = 0;
    DType dtype = DType::kFloat32;
    std::vector<uint8_t> data;
    uint64_t received = 0;
    uint64_t arrival = 0;
    // The receive that claimed it while it still arrives. refused: one of another size or
    // dtype; the rest is drained, not kept, and the claim ends with the refusal at the last chunk.
    std::optional<P2PRequest> claimed;
    bool refused = false;
  };
  // The message whose chunks are arriving from one source.
  struct Incoming {
    bool active = false;
    uint64_t bytes = 0;
    int tag = 0;         // as the first chunk said: every later chunk must say the same
    uint32_t dtype = 0;
    uint64_t received = 0;
    std::optional<P2PRequest> recv;  // its receive, or
    Unexpected* unexpected = nullptr;  // where it is kept until one is posted (unexpected_at)
    std::list<Unexpected>::iterator unexpected_at;
    // Non-null: recv refused the message (another size or dtype). Its chunks are drained, not
    // copied, and recv ends with this after the last one (it keeps this side polling until then).
    std::exception_ptr refusal;
  };

  bool push_sends(int dest, std::vector<Completion>& done);
  bool pull_chunks(int src, std::vector<Completion>& done);
  // Throws GroupFailedError (naming src) for a header that does not continue src's stream:
  // offset, size, tag or dtype other than the chunk due. Before any byte of it is copied.
  void check_chunk(int src, const ChunkHeader& h) const;
  void start_message(int src, const ChunkHeader& h, std::vector<Completion>& done);
  void deliver(int src, const ChunkHeader& h, const uint8_t* payload, std::vector<Completion>& done);
  // The kept message receive r takes (the earliest arrived of its tag from the sources it
  // accepts), taken off the index; *src < 0 when there is none.
  std::list<Unexpected>::iterator find_unexpected(const P2PRequest& r, int* src);
  // A receive posted with no message for it yet: kept, and indexed.
  void post_recv(P2PRequest r);
  // The earliest-posted receive a message from src with tag takes (from src or any source:
  // MPI's non-overtaking), off the index; empty when none.
  std::optional<P2PRequest> take_recv(int src, int tag);
  // A request ends: off the deadlines, onto `done`.
  void finish(const P2PRequest& r, std::exception_ptr error, int source, std::vector<Completion>& done);
  // Whether check() must walk the requests: a deadline passed or a rank one of them needs
  // is no longer usable. Memoizes liveness in alive_.
  bool suspect(Clock::time_point now, bool check_liveness) const;
  // Whether no request is kept anywhere (idle()'s walk over the queues and sources).
  bool holds_no_request() const;
  bool alive(int peer, bool check_liveness) const;
  void take_unexpected(int src, std::list<Unexpected>::iterator it, P2PRequest r, std::vector<Completion>& done);
  void check_peer(int peer, const P2PRequest& r, Clock::time_point now, bool check_liveness) const;
  // For receive r's Timeout: "; this rank holds 2 messages no receive has taken: from rank 1
  // (tag 0, 8 bytes), ..." (the first few, oldest first), "" when it holds none.
  std::string held_note(const P2PRequest& r) const;
  // Sets the stall watch's note (api/diagnostics/work_wait_note.h) on the oldest receive that
  // waits for a message: held_note's words, so that the "has waited" lines name the held
  // messages long before the receive's Timeout does. Once that receive has waited
  // kHeldNoteAfter, and again when it or the held set changes, at most once per
  // kHeldNoteAfter: an unchanged state costs two comparisons a look.
  void note_held_messages(Clock::time_point now);
  // A receive from any rank: fails only when no rank is left that could send it.
  void check_any_source(const P2PRequest& r, Clock::time_point now, bool check_liveness) const;
  // Whether `peer` has published chunks to this rank that are not consumed yet.
  bool has_unread(int peer) const;

  const MappedGroup& group_;
  std::vector<std::deque<P2PRequest>> sends_;  // per destination, in issue order
  std::map<uint64_t, P2PRequest> recvs_;       // posted and unmatched, by posting number
  uint64_t posted_ = 0;
  // The posting numbers of recvs_, per (source, tag) and per tag for any source, oldest first.
  using ByTag = std::unordered_map<int, std::deque<uint64_t>>;
  std::vector<ByTag> recvs_by_tag_;  // per source
  ByTag any_source_by_tag_;
  std::vector<size_t> recvs_from_;  // per source: how many of recvs_ name it
  size_t any_source_recvs_ = 0;
  // Every pending request's deadline (next_deadline, and check()'s quick answer).
  std::multiset<Clock::time_point> deadlines_;
  // Per check(): each peer's liveness, looked up once (-1: not yet).
  mutable std::vector<int8_t> alive_;
  std::vector<Incoming> incoming_;              // per source
  std::vector<std::list<Unexpected>> unexpected_;  // per source, in arrival order
  // Per source and tag: the unexpected messages no receive has claimed, in arrival order.
  std::vector<std::unordered_map<int, std::deque<std::list<Unexpected>::iterator>>> unexpected_by_tag_;
  // How many messages unexpected_by_tag_ holds, and a count of changes to that set (a
  // message set aside, or taken by a receive): what note_held_messages compares.
  size_t held_ = 0;
  uint64_t held_changes_ = 0;
  // What note_held_messages last settled: the receive (posting number, ~0: none yet) and the
  // held set it saw, and when it may write again.
  uint64_t noted_posted_ = ~uint64_t{0};
  uint64_t noted_changes_ = 0;
  bool note_set_ = false;  // that receive has a note (not cleared since)
  Clock::time_point next_note_{};
  std::vector<uint64_t> head_, tail_seen_;  // sends: chunks published, peer's in_tail as last read
  std::vector<uint64_t> tail_, head_seen_;  // receives: chunks consumed, peer's out_head as last read
  uint64_t arrivals_ = 0;
  Blocker blocker_;
  // Per destination: messages whose send completed, and the texts of those the destination
  // may not have taken yet (index = the message's number in the pair's stream), trimmed as
  // its taken count grows, and bounded.
  struct Sent {
    uint64_t index = 0;
    std::string what;
  };
  std::vector<uint64_t> sent_;
  std::vector<std::deque<Sent>> sent_texts_;
  // Per source: messages a receive has taken (published as Counter::taken).
  std::vector<uint64_t> taken_;
  void note_taken(int src);
};

}  // namespace shm
}  // namespace distcomm
