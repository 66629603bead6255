// The job's failure board over the core's TCPStore (launch/job_failure_board.h): internal to
// //launch:tcp_job_failure_board and //launch:tcp_job_store, which serves the store.
//
// Each board keeps one connection to the job's store for its attempt, so that a failure's
// marks cost their requests only, not a connect and a handshake too (a few round trips to
// node 0's store thread, tens of milliseconds on a loaded host: the ranks it stops are
// SIGTERMed after them, and a peer on another machine names them as stopped only if they go
// within its 100 ms grouping window, backends/gloo/gloo_connection_watch.cc).
#pragma once

namespace distcomm {
namespace launch {

// Closes the kept connections of this process's boards that reach the store on `port`, and
// makes their later calls fail at once: node 0's launcher calls it as the job's store goes
// (~TCPJobStore: its farewell waits until no client is connected, up to 30 s with several
// machines, and an attempt's board outlives its store). Another machine's board closes its
// connection as its attempt ends.
void release_failure_boards(int port);

}  // namespace launch
}  // namespace distcomm
