// Rank 0, the host of the job's store, leaving: the store's farewell after a failure, and
// what a rank says when the store goes away under it.
//
// Rank 0 serves the job's TCPStore unless a launcher does (tools/launch and spawn() serve it
// themselves, DISTCOMM_STORE_SERVED_BY, so that it outlives every rank and nothing here is
// needed). When rank 0 serves it and fails or reaches a deadline, it publishes why on
// that store (a group's failure record, group_failure.h; a group's creation_failed,
// init_wait.h; the error run_main caught, process_group.h) and then usually exits, which
// would take the store with it: the other ranks, still waiting on it or about to read the
// record, would get "the server closed the connection" instead of the cause.
//
// So whatever publishes a failure notes it here, and a TCPStore that serves the store,
// when it is destroyed after such a note (or while an exception unwinds the stack), serves
// on for a farewell: until every other client has closed its connection (a rank closes it
// once it has read the failure and given up, or exits) and none has come back for 0.2 s,
// at most kStoreFarewell. The
// ranks still connected then (one that never noticed, the culprit stuck elsewhere) cost
// the whole farewell, never more. A process without a failure never waits: its check is
// one atomic load.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>

#include "api/errors.h"

namespace distcomm {
namespace internal {

// Long enough for a rank to finish what it does when a peer fails (one or two store
// calls to read the record, a stall watch's tick), short enough not to hold up the
// failing rank's exit noticeably.
constexpr std::chrono::milliseconds kStoreFarewell{1000};

// This process has published a failure that its peers must be able to read.
void note_failure_for_peers();
// How many it has noted so far: a store compares it with the count at its creation.
uint64_t failures_noted_for_peers();

// The error of a rank whose store failed under it (the connection closed, reconnecting was
// refused): when a process of the job serves the store (`host`: "rank 0", or "the
// launcher" where tools/launch or spawn() serves it), a PeerFailure -- that process has
// gone, which says more than the store -- with "; rank 0 (which served the store) has
// exited or closed it" after `message`; otherwise a StoreError `message`.
std::exception_ptr store_lost(const std::string& message, const std::string& host);
// As above, for the StoreError `cause` that ended the wait: a refusal (the store on the
// port now belongs to another job, or the token is wrong) stays a StoreRefused, and a
// connection this process cut off (TCPStore::cut_off) a StoreError: neither says that the
// store's process has gone (a review found "rank 0 (which served the store) has exited" of
// another job's store answering on the port).
std::exception_ptr store_lost(const StoreError& cause, const std::string& message, const std::string& host);

// In the error of a call on a TCPStore that was cut off (TCPStore::cut_off).
constexpr char kCutOffWords[] = " was cut off: ";

// A TCPStore server of this process that cannot accept() for want of file descriptors
// (EMFILE, ENFILE) leaves the connections waiting in the kernel's backlog: their ranks'
// handshakes get no answer and they give up, while rank 0's init, which serves the store,
// would wait its whole timeout for them. The server notes each such failure here, and each
// accept that succeeds ends the spell; an init wait of this process (init_wait.h) that
// sees a spell go on for kAcceptStarvedGrace while the ranks it waits for stay missing
// ends with why (describe_accept_starvation). Process-wide, as the limit is.
struct AcceptStarvation {
  using Clock = std::chrono::steady_clock;
  uint64_t refused = 0;         // accept() failures in the spell; 0: none since the last accept
  int error = 0;                // the last one's errno
  Clock::time_point first{};    // the spell's first failure
  Clock::time_point last{};     // its latest
  long long fd_limit = -1;      // the soft RLIMIT_NOFILE then (-1: unlimited or unknown)
};
// How long a spell must last, with the ranks an init wait waits for still missing, before
// that wait gives up: the server retries accept() every 0.1 s meanwhile.
constexpr std::chrono::milliseconds kAcceptStarvedGrace{3000};
// A spell whose latest failure is older than this has ended (nothing left to accept).
constexpr std::chrono::milliseconds kAcceptStarvedRecent{1000};
void note_accept_failed(int error);
void note_accept_succeeded();
AcceptStarvation accept_starvation();
// Whether `s` is a spell still going on at `now` (its latest failure within kAcceptStarvedRecent).
bool accept_starved_now(const AcceptStarvation& s, AcceptStarvation::Clock::time_point now);
// "this process's TCPStore server ran out of file descriptors (... ulimit -n, is 10): accept()
// failed 31 times over 3.0 s (Too many open files), so it could not take their connections;
// raise `ulimit -n`".
std::string describe_accept_starvation(const AcceptStarvation& s);

}  // namespace internal
}  // namespace distcomm
