#include "api/store/server/store_server_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "api/errors.h"
#include "api/store/internal/store_handshake.h"
#include "api/store/internal/store_host.h"
#include "api/logging.h"

namespace distcomm {

using internal::Message;
using internal::Socket;
using internal::Status;

namespace {

constexpr size_t kReadChunk = size_t{64} << 10;
// What every connection may buffer each way without drawing on the shared pool: more than
// any rendezvous message, so that the job's small requests never wait for memory.
constexpr size_t kFreeBufferBytes = size_t{64} << 10;
// A full file table makes the listener readable with nothing to accept: rest this long.
constexpr std::chrono::milliseconds kAcceptPause{100};
constexpr int kAcceptsPerTurn = 64;
// In a farewell: how long without any client counts as "every client has left".
constexpr std::chrono::milliseconds kFarewellQuiet{200};

// Whether the peer has closed its end (its FIN, or a reset, is all that is left to read);
// never waits.
bool peer_has_closed(int fd) {
  char byte;
  const ssize_t r = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace

TCPStoreServer::Loop::Client::Client(Socket s, internal::BufferPool* pool)
    : sock(std::move(s)), in(pool, kFreeBufferBytes), out(pool, kFreeBufferBytes) {}

TCPStoreServer::Loop::Loop(Socket listener, const TCPStoreServerOptions& options, std::string where)
    : listener_(std::move(listener)), options_(options), where_(std::move(where)),
      max_request_(std::min(options.limits.max_buffered_bytes, internal::kMaxMessageBytes)),
      pool_(options.limits.max_buffered_bytes) {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw StoreError("TCPStoreServer: cannot create its wake-up pipe: " + internal::errno_message(errno));
  }
  wake_read_.reset(p[0]);
  wake_write_.reset(p[1]);
}

void TCPStoreServer::Loop::wake() {
  stop_.store(true);
  const char b = 0;
  // A full pipe already holds a wake-up; nothing to do on failure.
  [[maybe_unused]] ssize_t r = write(wake_write_.fd(), &b, 1);
}

void TCPStoreServer::Loop::serve_until_clients_leave(internal::Clock::time_point until) {
  farewell_until_.store(std::max<Clock::rep>(1, until.time_since_epoch().count()));
  const char b = 0;
  [[maybe_unused]] ssize_t r = write(wake_write_.fd(), &b, 1);
}

TCPStoreServer::Loop::Client* TCPStoreServer::Loop::find(int fd) {
  auto it = clients_.find(fd);
  return it == clients_.end() ? nullptr : it->second.get();
}

void TCPStoreServer::Loop::run() {
  std::vector<pollfd> fds;
  while (true) {
    const auto now = Clock::now();
    close_expired(now);
    Clock::time_point next = end_expired_waits(now);
    if (const Clock::rep farewell = farewell_until_.load()) {
      // Its owner has gone: serve the clients still here until they leave, never longer.
      // A client between two connections (a TCPStore reconnects after a request that
      // broke) has not left: only a quiet spell without any client ends it early.
      const Clock::time_point until{Clock::duration(farewell)};
      if (!clients_.empty() || last_client_seen_ == Clock::time_point{}) last_client_seen_ = now;
      if (now >= until || now >= last_client_seen_ + kFarewellQuiet) return;
      next = std::min({next, until, last_client_seen_ + kFarewellQuiet});
    }
    fds.clear();
    fds.push_back({wake_read_.fd(), POLLIN, 0});
    fds.push_back({listener_.fd(), static_cast<short>(now >= accept_paused_until_ ? POLLIN : 0), 0});
    if (now < accept_paused_until_) next = std::min(next, accept_paused_until_);
    for (auto& [fd, c] : clients_) {
      fds.push_back({fd, events_for(*c, now), 0});
      next = std::min(next, deadline_of(*c));
    }
    int timeout_ms = -1;
    if (next != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) continue;  // EINTR; poll has no other to retry
    if (fds[0].revents != 0) {
      if (stop_.load()) return;
      char drain[16];
      while (read(wake_read_.fd(), drain, sizeof drain) > 0) {
      }
      continue;  // a farewell began: looked at above
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      const int fd = fds[i].fd;
      const short ev = fds[i].revents;
      // A client that breaks the server's invariants (or makes it run out of memory) is
      // dropped; the others keep being served.
      try {
        if (ev & POLLOUT) on_writable(fd);
        if (ev & POLLIN) {
          on_readable(fd);
        } else if (ev & (POLLHUP | POLLERR | POLLNVAL)) {
          drop(fd);
        }
      } catch (const std::exception&) {
        drop(fd);
      }
    }
    // After the events above, so that a connection closed there cannot lend its number
    // (and its events) to a new one.
    if (fds[1].revents & POLLIN) {
      try {
        accept_clients();
      } catch (const std::exception&) {
        // Out of memory for a new client: it was closed; serve the ones we have.
      }
    }
    while (!runnable_.empty()) {
      const int fd = runnable_.back();
      runnable_.pop_back();
      try {
        serve(fd);
      } catch (const std::exception&) {
        drop(fd);
      }
    }
    wake_room_waiters();
  }
}

void TCPStoreServer::Loop::accept_clients() {
  // A bounded batch per turn, so that a flood of connections cannot keep the loop from
  // serving the ones it has.
  for (int i = 0; i < kAcceptsPerTurn; ++i) {
    const int fd = accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      internal::note_accept_succeeded();
      internal::set_nodelay(fd);
      make_room_for_pending();
      auto c = std::make_unique<Client>(std::move(s), &pool_);
      c->serial = next_serial_++;
      c->accepted = Clock::now();
      clients_[fd] = std::move(c);
      ++pending_;
      continue;
    }
    const int err = errno;
    if (err == EINTR || err == ECONNABORTED) continue;
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
      // The listener stays readable while the backlog waits: rest rather than spin.
      accept_paused_until_ = Clock::now() + kAcceptPause;
      // Rank 0's init, in this process, stops waiting for ranks that cannot get in.
      if (err == EMFILE || err == ENFILE) internal::note_accept_failed(err);
      note("files", "cannot accept more connections: " + internal::errno_message(err) +
                        " (raise the open-files limit, ulimit -n)");
    }
    return;
  }
}

void TCPStoreServer::Loop::make_room_for_pending() {
  if (pending_ < options_.limits.max_pending) return;
  // Closing the oldest rather than refusing the newest: a rank's handshake takes a round
  // trip, so a crowd of idle connections cannot keep it out.
  int oldest = -1;
  uint64_t serial = UINT64_MAX;
  for (const auto& [fd, c] : clients_) {
    if (c->stage != Stage::kReady && c->serial < serial) {
      serial = c->serial;
      oldest = fd;
    }
  }
  if (oldest < 0) return;
  note("pending", "closed the connection from " + internal::peer_name(oldest) + " to make room: " +
                     std::to_string(pending_) + " connections were in the handshake at once "
                     "(TCPStoreLimits::max_pending)");
  drop(oldest);
}

size_t TCPStoreServer::Loop::read_limit(const Client& c) const {
  return std::max(c.in.capacity(), c.stage == Stage::kReady ? kFreeBufferBytes : internal::kMaxHandshakeBytes);
}

short TCPStoreServer::Loop::events_for(Client& c, Clock::time_point now) {
  if (c.out_sent < c.out.size()) return POLLOUT;
  if (c.stage == Stage::kClosing) return 0;
  if (c.in.size() < read_limit(c)) return POLLIN;
  // The free allowance is full: grow the buffer for the partial request at its front, if
  // there is one (a blocked client's buffered requests wait for it to be answered).
  const size_t want = !c.blocked && c.in_needed > c.in.size() ? c.in_needed : 0;
  if (want == 0) return 0;
  if (!c.in.reserve(want)) {
    c.starved = true;
    return 0;
  }
  if (c.starved) c.in_since = now;  // the transfer deadline starts once there is room
  c.starved = false;
  return POLLIN;
}

TCPStoreServer::Loop::Clock::time_point TCPStoreServer::Loop::deadline_of(const Client& c) const {
  if (c.stage != Stage::kReady) return c.accepted + options_.limits.handshake_deadline;
  auto d = Clock::time_point::max();
  if (c.in.size() > 0 && !c.starved) d = c.in_since + options_.limits.transfer_deadline;
  if (c.out_sent < c.out.size()) d = std::min(d, c.out_since + options_.limits.transfer_deadline);
  return d;
}

void TCPStoreServer::Loop::close_expired(Clock::time_point now) {
  std::vector<int> expired;
  for (const auto& [fd, c] : clients_) {
    if (deadline_of(*c) <= now) expired.push_back(fd);
  }
  for (const int fd : expired) {
    const Client* c = find(fd);
    if (c != nullptr && c->stage == Stage::kProof) note_left_without_proof(fd);
    drop(fd);
  }
}

void TCPStoreServer::Loop::on_readable(int fd) {
  Client* c = find(fd);
  if (!c) return;
  // POLLIN is only asked for while the buffer has room. Read into scratch and append what
  // came, so that a connection's buffer holds what it was sent, not a whole read chunk.
  const size_t old = c->in.size();
  const size_t room = std::min(kReadChunk, read_limit(*c) - old);
  if (room == 0) return;
  scratch_.resize(kReadChunk);
  const ssize_t r = recv(fd, scratch_.data(), room, MSG_DONTWAIT);
  const int err = errno;
  if (r > 0) {
    // Within the free allowance, or within the room reserved for the request: no charge.
    if (!c->in.reserve(old + static_cast<size_t>(r))) throw StoreError("TCPStoreServer: no room for a read");
    c->in.append(scratch_.data(), static_cast<size_t>(r));
    if (old == 0) c->in_since = Clock::now();
    serve(fd);
  } else if (r == 0 || (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)) {
    if (c->stage == Stage::kProof) note_left_without_proof(fd);
    drop(fd);
  }
}

// A client that named this job's run id, was asked for the token's proof and closed (or let
// the handshake's deadline pass) without one: a rank or launcher started without the job's
// token refuses itself on its side, so without this line the store's host said nothing of
// it, where a wrong token or another run id each leave one. Once, like those.
void TCPStoreServer::Loop::note_left_without_proof(int fd) {
  note("no token", "refused a connection from " + internal::peer_name(fd) +
                       ": it has this job's run id but proved no store token (started without " +
                       kStoreTokenVariable + "?)");
}

void TCPStoreServer::Loop::on_writable(int fd) {
  Client* c = find(fd);
  if (!c) return;
  if (!flush(fd, *c)) {
    drop(fd);
  } else if (c->out.size() == 0) {
    if (c->stage == Stage::kClosing) {
      drop(fd, Close::kGraceful);  // its refusal was sent whole
    } else {
      serve(fd);
    }
  }
}

void TCPStoreServer::Loop::serve(int fd) {
  Client* c = find(fd);
  if (!c) return;
  const size_t limit = c->stage == Stage::kReady ? max_request_ : internal::kMaxHandshakeBytes;
  size_t pos = 0;
  // One request at a time, each answered before the next is read: a client cannot make
  // the server queue replies it does not read.
  while (!c->blocked && c->stage != Stage::kClosing && c->out.size() == 0 && pos < c->in.size()) {
    const uint8_t* data = c->in.bytes().data() + pos;
    const size_t size = c->in.size() - pos;
    Message m;
    size_t used = 0;
    std::string error;
    // An unknown command byte is refused at once, not after waiting for a length.
    const bool known = c->stage == Stage::kReady ? internal::is_command(data[0])
                                                 : data[0] == static_cast<uint8_t>(internal::Command::kHello) ||
                                                       data[0] == static_cast<uint8_t>(internal::Command::kProve);
    const auto r = known ? internal::parse_message(data, size, &m, &used, &error, limit, &c->in_needed)
                         : internal::ParseResult::kInvalid;
    if (r == internal::ParseResult::kIncomplete) break;
    if (r == internal::ParseResult::kInvalid) {
      if (c->stage == Stage::kProof) note_left_without_proof(fd);  // bytes that are no proof
      drop(fd);
      return;
    }
    pos += used;
    c->in_needed = 0;
    if (c->stage != Stage::kReady) {
      if (!handshake(*c, m)) {
        if (c->stage == Stage::kProof) note_left_without_proof(fd);  // a message that is no proof
        drop(fd);
        return;
      }
    } else if (!internal::validate_request(m).empty()) {
      drop(fd);
      return;
    } else {
      handle(fd, *c, std::move(m));
    }
  }
  if (pos > 0) {
    c->in.consume(pos);
    if (c->in.size() > 0) c->in_since = Clock::now();
  }
  if (!flush(fd, *c)) {
    drop(fd);
  } else if (c->stage == Stage::kClosing && c->out.size() == 0) {
    drop(fd, Close::kGraceful);
  }
}

bool TCPStoreServer::Loop::handshake(Client& c, const Message& m) {
  const JobIdentity& id = options_.identity;
  if (c.stage == Stage::kHello) {
    internal::ClientHello hello;
    if (!internal::parse_client_hello(m, &hello).empty()) return false;
    c.client_nonce = hello.nonce;
    c.world_size = hello.world_size;
    c.server_nonce = random_bytes(internal::kNonceBytes);
    internal::ServerHello mine{id.run_id, c.server_nonce, !id.token.empty(), max_request_};
    if (hello.run_id != id.run_id) {
      // Answered, so that the client can say whose store it reached, then closed.
      reply(c, Status::kOk, internal::encode_server_hello(mine));
      c.stage = Stage::kClosing;
      note("run id", "refused a connection from " + internal::peer_name(c.sock.fd()) +
                         ": it belongs to another job (" + internal::describe_run_id(hello.run_id) + ")");
      return true;
    }
    // With a token, only a client that proved it may say what the job is: a stranger that
    // knows the run id must not end this job's waits.
    if (!mine.token_required && world_size_differs(c)) return true;
    if (!mine.token_required && at_connection_cap(c)) return true;
    // A client that has closed its end already (its FIN waits behind its HELLO) is dropped
    // unanswered and unnamed: the job's own client that gave up waiting (its connect's
    // timeout) while the server was slow or stopped, which tries again or says itself why it
    // ended -- not a stranger, whom the alarm is for. Unanswered, so that a stranger that
    // half-closes after its HELLO learns nothing (no nonce) for going unnamed.
    if (mine.token_required && peer_has_closed(c.sock.fd())) return false;
    reply(c, Status::kOk, internal::encode_server_hello(mine));
    if (mine.token_required) {
      c.stage = Stage::kProof;
    } else {
      become_ready(c);
    }
    return true;
  }
  if (m.kind != static_cast<uint8_t>(internal::Command::kProve) || m.fields.size() != 1 ||
      m.fields[0].size() != internal::kNonceBytes) {
    return false;
  }
  const internal::Digest expected =
      internal::handshake_proof(internal::Prover::kClient, id.token, id.run_id, c.client_nonce, c.server_nonce);
  if (!internal::equal_in_constant_time(m.fields[0].data(), expected.data(), expected.size())) {
    refuse(c, "token", "wrong store token");
    return true;
  }
  if (world_size_differs(c)) return true;
  if (at_connection_cap(c)) return true;
  const internal::Digest proof =
      internal::handshake_proof(internal::Prover::kServer, id.token, id.run_id, c.client_nonce, c.server_nonce);
  reply(c, Status::kOk, internal::FieldRef(proof.data(), proof.size()));
  become_ready(c);
  return true;
}

bool TCPStoreServer::Loop::world_size_differs(Client& c) {
  const int64_t theirs = c.world_size;
  const int ours = options_.world_size;
  if (ours <= 0 || theirs <= 0 || theirs == ours) return false;
  const std::string peer = internal::peer_name(c.sock.fd());
  std::string why = options_.world_size_mismatch
                        ? options_.world_size_mismatch(theirs, peer)
                        : "this store serves a job of " + std::to_string(ours) + " ranks, and the client at " + peer +
                              " says its job has " + std::to_string(theirs) + ": every rank needs the same WORLD_SIZE";
  // The client reads at most this much of a reply before the handshake is over.
  why.resize(std::min(why.size(), internal::kMaxHandshakeBytes));
  refuse(c, "world size", why, /*log=*/!options_.world_size_mismatch);
  if (!options_.world_size_mismatch && job_cannot_run_.empty()) {
    job_cannot_run_ = internal::kJobCannotRun + why;
    fail_waits();
  }
  return true;
}

bool TCPStoreServer::Loop::at_connection_cap(Client& c) {
  if (ready_ < options_.limits.max_connections) return false;
  refuse(c, "cap",
         internal::kConnectionCapRefusal + std::to_string(ready_) + " connections of this job, its limit "
         "(TCPStoreLimits::max_connections; by default 2 x world size + 16): does a rank open stores "
         "without closing them?");
  return true;
}

void TCPStoreServer::Loop::become_ready(Client& c) {
  c.stage = Stage::kReady;
  --pending_;
  ++ready_;
}

void TCPStoreServer::Loop::refuse(Client& c, const std::string& kind, const std::string& why, bool log) {
  reply(c, Status::kError, why);
  c.stage = Stage::kClosing;
  if (log) note(kind, "refused a connection from " + internal::peer_name(c.sock.fd()) + ": " + why);
}

void TCPStoreServer::Loop::note(const std::string& kind, const std::string& what) {
  // Once per kind: a port scanner must not flood rank 0's output.
  if (!noted_.insert(kind).second) return;
  log_line("TCPStore server on " + where_ + ": " + what + " (later ones like it are not logged)");
}

bool TCPStoreServer::Loop::flush(int fd, Client& c) {
  auto& out = c.out.bytes();
  while (c.out_sent < out.size()) {
    const ssize_t r = send(fd, out.data() + c.out_sent, out.size() - c.out_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      c.out_sent += static_cast<size_t>(r);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return true;
    } else if (errno != EINTR) {
      return false;
    }
  }
  c.out.consume(out.size());
  c.out_sent = 0;
  return true;
}

void TCPStoreServer::Loop::drop(int fd, Close how) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  if (how == Close::kReset) {
    // A reset, not a FIN queued behind unsent replies: the kernel frees the connection's
    // buffers at once, and the client learns at once.
    const linger abort{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  }
  unpark(fd, *it->second);
  if (it->second->stage == Stage::kReady) {
    --ready_;
  } else {
    --pending_;
  }
  clients_.erase(it);
}

}  // namespace distcomm
