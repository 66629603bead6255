// TCPStoreServer: the key-value server behind TCPStore.
//
// One thread runs a poll() loop over every connection, so a thousand ranks cost a
// thousand sockets, not a thousand threads. A get() or wait() whose keys are missing
// parks that client on the keys, and the set/add/compare_set that creates them answers
// it: nothing blocks the loop. A wait() carries its timeout (WAIT_FOR), and the server
// answers "not yet" when it passes, so the client's connection stays in step; a get()
// has no timeout here (its client gives up and reconnects).
//
// The server is the job's front door, and reads untrusted bytes:
// - A connection starts with a handshake (internal/store_handshake.h): it must name the
//   job's run id and, when the server has a token, prove it knows the token. A client of
//   the job (past the token, when there is one) that names another world size than the
//   server's (both known) is refused with why; and, unless the server's owner takes that
//   (world_size_mismatch), the job cannot run: every wait on a missing key, parked or
//   later, is answered with an error saying so, instead of waiting for ranks that may never
//   come. Keys that exist are still read, and writes still succeed. Until then
//   the server buffers at most 1 KiB for it, and closes it after limits.handshake_deadline.
// - A client that sends an unknown command, a bad length, a request over the size limits
//   (64 KiB keys; a request must fit in limits.max_buffered_bytes) is disconnected, and
//   the others are served on.
// - Memory: each connection buffers up to 64 KiB for free; beyond that, requests being
//   received and replies being sent share limits.max_buffered_bytes. A request must
//   arrive whole, and a reply be read whole, within limits.transfer_deadline (counted
//   from when the server had room for it), or the connection is closed. Idle connections
//   and parked get() calls have no deadline of the server's (their clients' own).
// - Connections: past limits.max_connections handshaken connections a newcomer is refused
//   (those established stay); past limits.max_pending connections still in the
//   handshake, the oldest of those is closed to make room.
// Stored keys and values are not capped: only a client through the handshake can store.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "api/process/job_identity.h"

namespace distcomm {

struct TCPStoreLimits {
  // Bytes buffered across all connections beyond each one's first 64 KiB; also the
  // largest request, so the largest value a client can set.
  size_t max_buffered_bytes = size_t{64} << 20;
  // Connections through the handshake. 0: 2 * world_size + 16 when the world size is
  // known, else 1024.
  int max_connections = 0;
  // Connections still in the handshake. 0: world_size + 64 when known, else 256.
  int max_pending = 0;
  std::chrono::milliseconds handshake_deadline{10000};
  std::chrono::milliseconds transfer_deadline{30000};
};

// The limits with their defaults filled in for a job of world_size ranks (-1: unknown).
TCPStoreLimits resolve_limits(TCPStoreLimits limits, int world_size);

// Where the server of a store that clients reach at `host` listens
// (TCPStoreServerOptions::bind_address), given `bind` as TCPStoreOptions::bind_address takes
// it: "" is host's address, "*" every interface, anything else that address. One rule, so
// that a launcher serving the job's store listens where rank 0 would.
std::string server_bind_address(const std::string& host, const std::string& bind);

struct TCPStoreServerOptions {
  // An address (or name) of this host to listen on; "" listens on every interface.
  std::string bind_address;
  // What chose bind_address when it is not the store's host ("DISTCOMM_STORE_BIND"): named
  // in the error when it is not this host's address. "": MASTER_ADDR.
  std::string bind_address_named_by;
  int port = 0;  // 0 picks a free port (see port())
  // Clients must name identity.run_id, and prove identity.token when it is not empty.
  JobIdentity identity;
  // -1: unknown. When known, a client whose HELLO names another world size is refused: its
  // ranks and this job's would otherwise wait for each other until their timeout.
  int world_size = -1;
  TCPStoreLimits limits;
  // Unset: that refusal says "this store serves a job of 4 ranks, this client's has 6",
  // and ends every wait on a missing key with "the job cannot run: " and that.
  // Set: it is called (on the server's thread) with the client's world size and address,
  // and returns the refusal's text instead -- its owner knows the job's shape and what to
  // change, and learns so that the job cannot run (node 0's launcher stops its ranks).
  std::function<std::string(int64_t client_world_size, const std::string& client)> world_size_mismatch;
  // Set: called (on the server's thread; it must be quick, and not throw) with each key
  // whose name starts with created_prefix, and its value, when a client creates it (a set,
  // add or compare_set of a missing key). The launcher serving a fault-tolerant job's store
  // learns so which members their group fenced (api/process/fenced_member.h).
  std::string created_prefix;
  std::function<void(const std::string& key, const std::string& value)> on_created;
};

class TCPStoreServer {
 public:
  explicit TCPStoreServer(TCPStoreServerOptions options = {});
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  // Listens and starts serving. Throws StoreError when the address cannot be bound
  // (another job on the port, an address that is not this host's).
  void start();
  // Closes every connection and stops the thread. Safe to call twice.
  void stop();
  // The farewell of a server whose owner is going away after a failure (tcp_store.h): it
  // goes on serving until no client has been connected for 0.2 s (a TCPStore client
  // reconnects after a get that timed out: a moment without it is not its leaving) or
  // `grace` has passed, whichever is first, then stops. Returns then.
  void stop_after_farewell(std::chrono::milliseconds grace);
  bool running() const { return thread_.joinable(); }
  // The port it listens on, known once start() returned.
  int port() const { return options_.port; }
  const TCPStoreLimits& limits() const { return options_.limits; }

 private:
  class Loop;

  TCPStoreServerOptions options_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace distcomm
