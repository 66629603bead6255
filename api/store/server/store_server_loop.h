// The TCPStore server's event loop (see tcp_store_server.h for what it promises).
// store_server_loop.cc runs connections: poll, accept, handshake, buffers, deadlines and
// caps; store_server_requests.cc answers the key-value requests and parks waiters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/store/server/charged_buffer.h"
#include "api/store/internal/key_value_map.h"
#include "api/store/internal/socket.h"
#include "api/store/internal/store_protocol.h"
#include "api/store/server/tcp_store_server.h"

namespace distcomm {

class TCPStoreServer::Loop {
 public:
  // options.limits must be resolved; `where` names the server in its log lines.
  Loop(internal::Socket listener, const TCPStoreServerOptions& options, std::string where);
  void run();
  // Callable from any thread: makes run() return.
  void wake();
  // Callable from any thread: run() goes on serving until every connection has closed or
  // `until` has come, whichever is first, then returns (tcp_store_server.h, farewell).
  void serve_until_clients_leave(internal::Clock::time_point until);

 private:
  using Clock = internal::Clock;
  enum class Stage { kHello, kProof, kReady, kClosing };

  struct Client {
    Client(internal::Socket s, internal::BufferPool* pool);
    internal::Socket sock;
    Stage stage = Stage::kHello;
    uint64_t serial = 0;  // accept order: the oldest pending connection goes first
    Clock::time_point accepted;
    std::string client_nonce;
    std::string server_nonce;
    // What its HELLO said the job's world size is (-1: unknown), checked once it is known
    // to be of this job: at HELLO without a token, after its proof with one.
    int64_t world_size = -1;
    internal::ChargedBuffer in;
    internal::ChargedBuffer out;
    size_t out_sent = 0;
    // How many bytes the partial request at the front of `in` is known to need.
    size_t in_needed = 0;
    // When the partial request started (or the server made room for it), and when the
    // unsent replies were queued: the transfer deadline counts from these.
    Clock::time_point in_since;
    Clock::time_point out_since;
    // The pool had no room for the partial request: its deadline waits with it.
    bool starved = false;
    // A request not answered yet: parked on missing keys, or waiting for room for its reply.
    bool blocked = false;
    bool waiting_for_room = false;
    internal::Message request;
    std::vector<std::string> parked_on;
    // A WAIT_FOR parked on missing keys is answered "not yet" at this time.
    Clock::time_point wait_until = Clock::time_point::max();
  };

  // Connections (store_server_loop.cc).
  void accept_clients();
  void make_room_for_pending();
  // How much of a request the server reads before it must make room: the free allowance
  // (1 KiB before the handshake is over), or the room already made for the request.
  size_t read_limit(const Client& c) const;
  short events_for(Client& c, Clock::time_point now);
  Clock::time_point deadline_of(const Client& c) const;
  void close_expired(Clock::time_point now);
  void on_readable(int fd);
  void on_writable(int fd);
  void serve(int fd);
  // False when the client broke the handshake and must be dropped.
  bool handshake(Client& c, const internal::Message& m);
  void become_ready(Client& c);
  bool at_connection_cap(Client& c);
  // Refuses a client whose HELLO named another world size than the server's (both known).
  // Without an owner to tell (options_.world_size_mismatch), the job cannot run: every
  // wait of its ranks on this store ends with why (fail_waits).
  bool world_size_differs(Client& c);
  // Answers every parked GET, WAIT and WAIT_FOR with job_cannot_run_; later ones that
  // would park get it at once (retry).
  void fail_waits();
  // Answers with an error, then closes once it is sent; logs the first refusal of a kind
  // (unless `log` is false: the server's owner says it).
  void refuse(Client& c, const std::string& kind, const std::string& why, bool log = true);
  void note(const std::string& kind, const std::string& what);
  // note() of a client that left in Stage::kProof, or sent something else than its proof:
  // it knew the run id, not the token. (One that had closed before its HELLO was answered
  // gets no hello and no line: handshake().)
  void note_left_without_proof(int fd);
  bool flush(int fd, Client& c);
  // kReset for a client that broke a rule or a deadline; kGraceful after a refusal.
  enum class Close { kGraceful, kReset };
  void drop(int fd, Close how = Close::kReset);
  Client* find(int fd);

  // Requests (store_server_requests.cc).
  void handle(int fd, Client& c, internal::Message m);
  // Answers c.request when its keys exist and its reply has room; true when it did.
  bool retry(int fd, Client& c);
  void execute(Client& c, internal::Message& m, bool* created);
  size_t reply_bound(const internal::Message& m) const;
  void unpark(int fd, Client& c);
  // Wakes the clients parked on `key`, and tells options_.on_created of it.
  void key_created(const std::string& key);
  // Answers a parked request now, with `payload` (a WAIT_FOR's "not yet", an error).
  void answer_parked(int fd, Client& c, internal::Status status, internal::FieldRef payload);
  // Answers every WAIT_FOR whose time has come with "not yet"; returns the next such time.
  Clock::time_point end_expired_waits(Clock::time_point now);
  void wake_room_waiters();
  void reply(Client& c, internal::Status s, internal::FieldRef field);

  // Whether run() must return now (the wake-up pipe says only "look").
  std::atomic<bool> stop_{false};
  // The farewell's end, in steady-clock ticks; 0 while there is none.
  std::atomic<Clock::rep> farewell_until_{0};
  // In a farewell, the last time a client was connected.
  Clock::time_point last_client_seen_{};

  internal::Socket listener_;
  internal::Socket wake_read_;
  internal::Socket wake_write_;
  const TCPStoreServerOptions options_;
  const std::string where_;
  const size_t max_request_;
  internal::BufferPool pool_;
  internal::KeyValueMap map_;
  std::unordered_map<int, std::unique_ptr<Client>> clients_;
  std::unordered_map<std::string, std::vector<int>> parked_;
  // Clients unblocked by another client's request; served after the current event so
  // that one SET waking many waiters does not recurse.
  std::vector<int> runnable_;
  std::vector<int> room_waiters_;
  uint64_t releases_seen_ = 0;
  uint64_t next_serial_ = 0;
  int ready_ = 0;
  int pending_ = 0;
  Clock::time_point accept_paused_until_;
  std::set<std::string> noted_;
  Store::Bytes scratch_;  // what each recv() lands in
  // Why the job this store serves cannot run ("" while it can): a rank of it (past the
  // token, when there is one) says the job has another number of ranks, so the ranks the
  // others wait for may never come.
  std::string job_cannot_run_;
};

}  // namespace distcomm
