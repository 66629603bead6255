// The job's failure board over TCP (launch/tcp_job_failure_board.cc) keeps one connection to
// the job's store: a failure's marks cost their requests, not a connect and a handshake
// too, before the launcher's SIGTERMs (a peer on another machine names the stopped ranks
// only if they go within its 100 ms grouping window). Every call is bounded, a connection
// the server closed is made again, and the kept connection does not hold the job's store's
// farewell open once that store ends (release_failure_boards).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process/job_identity.h"
#include "api/process/launcher_stop.h"
#include "api/store/server/tcp_store_server.h"
#include "api/store/tcp_store.h"
#include "launch/job_failure_board.h"
#include "launch/job_store.h"
#include "launch/tcp_job_failure_board.h"
#include "launch/tcp_job_store.h"

namespace distcomm {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TCPStoreServerOptions server_options(const JobIdentity& identity, int max_connections, int port = 0) {
  TCPStoreServerOptions o;
  o.bind_address = "127.0.0.1";
  o.port = port;
  o.identity = identity;
  o.limits.max_connections = max_connections;
  return o;
}

std::unique_ptr<TCPStore> client(const JobIdentity& identity, int port,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  TCPStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.identity = identity;
  o.timeout = timeout;
  return std::make_unique<TCPStore>(o);
}

std::unique_ptr<JobFailureBoard> open_board(const JobIdentity& identity, int port) {
  EXPECT_TRUE(job_failure_board_opener()) << "//launch:tcp_job_failure_board is not linked";
  return job_failure_board_opener()(JobStoreAddress{"127.0.0.1", port, identity});
}

FailureNote note_of_node(int node) {
  FailureNote n;
  n.unix_time_ns = 1000 + node;
  n.node_rank = node;
  n.rank = 4;
  n.text = "rank 4 (local rank 1, pid 7) failed first (signal SIGKILL (Killed))";
  return n;
}

std::vector<std::pair<int, std::string>> stops() {
  return {{3, "rank 4 failed (signal SIGKILL)"}, {5, "rank 4 failed (signal SIGKILL)"}};
}

// Where a stop's marks are: what a survivor's backend reads (GroupFailure::stopped_by_launcher).
std::vector<std::optional<Store::Bytes>> marks(TCPStore& store) {
  return read_present(store, {launcher_stop_key(3), launcher_stop_key(5)});
}

// The stop's publish goes over the connection the board made before: with every other
// connection the store takes in use, it still leaves its marks (a board that connects for
// each publish is refused here, and leaves none). Its store takes 2 connections.
TEST(FailureBoardConnection, AStopsMarksGoOverTheConnectionMadeBefore) {
  const JobIdentity identity = new_job_identity();
  TCPStoreServer server(server_options(identity, /*max_connections=*/2));
  server.start();
  std::unique_ptr<JobFailureBoard> board = open_board(identity, server.port());
  // The launcher's first call, long before a rank fails (its connection is made by then).
  EXPECT_TRUE(board->others(2, 1).empty());
  // Every connection the store has left is taken (a survivor's, and whatever else fits).
  std::unique_ptr<TCPStore> survivor = client(identity, server.port());
  std::vector<std::unique_ptr<TCPStore>> others;
  for (int i = 0; i < 4; ++i) {
    try {
      others.push_back(client(identity, server.port(), std::chrono::milliseconds(1000)));
    } catch (const StoreError&) {
      break;  // the store is full
    }
  }
  ASSERT_LT(others.size(), 4u);
  const Clock::time_point began = Clock::now();
  EXPECT_TRUE(board->publish(note_of_node(1), stops())) << board->unreachable_why();
  EXPECT_LT(seconds_since(began), 1.0);
  // Stored before publish returned (the SIGTERMs come after it): one read finds them all.
  const std::vector<std::optional<Store::Bytes>> found = marks(*survivor);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_TRUE(found[0] && to_string(*found[0]) == "rank 4 failed (signal SIGKILL)");
  EXPECT_TRUE(found[1] && to_string(*found[1]) == "rank 4 failed (signal SIGKILL)");
  EXPECT_TRUE(survivor->check({first_failure_key(1)}));
}

// A connection the store closed (its server restarted on the port) is made again within the
// call: the marks still get there.
TEST(FailureBoardConnection, AConnectionTheStoreClosedIsMadeAgain) {
  const JobIdentity identity = new_job_identity();
  auto first = std::make_unique<TCPStoreServer>(server_options(identity, 0));
  first->start();
  const int port = first->port();
  std::unique_ptr<JobFailureBoard> board = open_board(identity, port);
  EXPECT_TRUE(board->others(2, 1).empty());
  first->stop();  // closes the board's connection
  first.reset();
  TCPStoreServer second(server_options(identity, 0, port));
  second.start();
  EXPECT_TRUE(board->publish(note_of_node(1), stops())) << board->unreachable_why();
  std::unique_ptr<TCPStore> survivor = client(identity, port);
  const std::vector<std::optional<Store::Bytes>> found = marks(*survivor);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_TRUE(found[0] && found[1]);
}

// A store nobody serves: the publish gives up within its bound, saying why, and the end's
// read that follows it answers at once instead of waiting as long again.
TEST(FailureBoardConnection, AStoreNotReachedCostsOneBoundedWait) {
  const JobIdentity identity = new_job_identity();
  int port = 0;
  {
    TCPStoreServer gone(server_options(identity, 0));
    gone.start();
    port = gone.port();
  }
  std::unique_ptr<JobFailureBoard> board = open_board(identity, port);
  Clock::time_point began = Clock::now();
  EXPECT_FALSE(board->publish(note_of_node(1), stops()));
  EXPECT_LT(seconds_since(began), 6.0);  // the connect ahead's and the call's 1.5 s, with room for a loaded host
  EXPECT_FALSE(board->unreachable_why().empty());
  began = Clock::now();
  EXPECT_TRUE(board->others(2, 1).empty());
  EXPECT_LT(seconds_since(began), 0.5);
}

// Node 0's launcher serves the job's store, and its attempt's board outlives it: the store's
// end (its farewell waits until no client is connected, up to 30 s with several machines)
// closes the board's kept connection, and does not wait for it.
TEST(FailureBoardConnection, TheJobStoresEndDoesNotWaitForTheBoard) {
  JobStoreRequest r;
  r.host = "127.0.0.1";
  r.identity = new_job_identity();
  r.world_size = 2;
  r.nnodes = 2;
  r.nproc_per_node = 1;
  std::unique_ptr<JobStore> store = serve_tcp_job_store(r);
  std::unique_ptr<JobFailureBoard> board = open_board(r.identity, store->port());
  EXPECT_TRUE(board->publish(note_of_node(0), {})) << board->unreachable_why();
  const Clock::time_point began = Clock::now();
  store.reset();
  EXPECT_LT(seconds_since(began), 10.0);  // 30 s when the board's connection holds it
  EXPECT_FALSE(board->publish(note_of_node(0), {}));  // at once: the store has ended
}

}  // namespace
}  // namespace launch
}  // namespace distcomm
