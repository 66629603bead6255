#include "api/store/tcp_store.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <thread>
#include <utility>

#include "api/errors.h"
#include "api/store/internal/timed_lock.h"
#include "api/store/internal/call_deadline.h"
#include "api/store/internal/close_on_fork.h"
#include "api/store/internal/key_value_map.h"
#include "api/store/internal/socket.h"
#include "api/store/internal/store_host.h"
#include "api/store/internal/store_handshake.h"
#include "api/store/internal/store_protocol.h"

namespace distcomm {

using internal::Command;
using internal::FieldRef;
using internal::IoStatus;

namespace {

// After a broken connection or a timeout the next request reconnects. A server that is
// gone should fail it promptly, not after the whole store timeout.
constexpr std::chrono::milliseconds kReconnectTimeout{1000};
// ... and after the server itself closed the connection, this long: its listener still
// refusing then means that it has gone (a server that is there accepts at once).
constexpr std::chrono::milliseconds kReconnectAfterCloseTimeout{100};
// A TCPStore server answers the handshake in a round trip, and closes connections that
// take longer than its own handshake deadline (10 s): past this, what listens is not one.
constexpr std::chrono::milliseconds kHandshakeTimeout{10000};
// Naming exactly which keys are missing after a wait timed out costs one more round
// trip; it is given this long before the message falls back to all the keys.
constexpr std::chrono::milliseconds kMissingKeysTimeout{1000};
// How much longer than a wait's own timeout this side waits for the server to end it.
constexpr std::chrono::milliseconds kWaitReplyGrace{10000};
// ... and for a wait cut short by the thread's call deadline (call_deadline.h), at most this
// much of what is left of it (a quarter when less is left): the server ends the wait that
// much earlier, so that its answer too comes by the deadline.
constexpr std::chrono::milliseconds kBoundedWaitReplyGrace{2000};
// A call with less than this left of its call deadline is not made (a round trip on a busy
// host takes longer; cut off, it would also cost the connection).
constexpr std::chrono::milliseconds kLeastCallTime{5};
// The least a call waits for another thread's request on the connection (unless its call
// deadline is sooner): requests take milliseconds, and a 50 ms wait slice behind one must not
// fail for it.
constexpr std::chrono::milliseconds kMinQueueWait{2000};
constexpr std::chrono::milliseconds kWaitForEver{int64_t{1} << 35};
constexpr char kInitKey[] = "init/";

}  // namespace

struct TCPStore::Request {
  Command command;
  std::vector<FieldRef> fields;
  std::chrono::milliseconds timeout;
  // The keys a GET or WAIT waits for: its timeout is a Timeout that names them.
  const std::vector<std::string>* waited = nullptr;
  // The reply's size, when the command fixes it.
  int64_t reply_size = -1;
  // How long the call may wait for another thread's request on the connection, when not
  // `timeout` (WAIT_FOR: the wait's own timeout, without the server's grace).
  std::chrono::milliseconds queue_timeout{-1};
  // Whether the thread's call deadline shortened `timeout` (then a timeout is the caller's:
  // the keys are not checked again after it).
  bool cut_by_scope = false;
  // WAIT_FOR: how long the server is told to wait (fields[0]); call() shortens it, here and
  // in the request, when the call deadline comes sooner.
  std::chrono::milliseconds* server_wait = nullptr;
};

TCPStore::TCPStore(TCPStoreOptions options)
    : options_(std::move(options)), failures_at_start_(internal::failures_noted_for_peers()) {
  timeout_ = options_.timeout;
  if (options_.is_server) {
    // server_bind_address would take an empty host for the wildcard: a store listens on
    // every interface only when bind_address says "*" (docs/security.md).
    if (options_.host.empty() && options_.bind_address.empty()) {
      throw InvalidArgument("TCPStore: host is empty: expected the address the server listens on and its clients "
                            "connect to (bind_address \"*\" listens on every interface)");
    }
    TCPStoreServerOptions so;
    so.bind_address = server_bind_address(options_.host, options_.bind_address);
    if (!options_.bind_address.empty() && options_.bind_address != "*") {
      so.bind_address_named_by = "the store's bind address (DISTCOMM_STORE_BIND, TCPStoreOptions::bind_address)";
    }
    so.port = options_.port;
    so.identity = options_.identity;
    so.world_size = options_.num_workers;
    so.limits = options_.limits;
    server_ = std::make_unique<TCPStoreServer>(so);
    server_->start();
    options_.port = server_->port();
    // Listening elsewhere than host: this store's own connection goes there.
    if (!so.bind_address.empty() && options_.bind_address != "*") options_.host = so.bind_address;
  } else if (options_.port <= 0 || options_.port > 65535) {
    throw InvalidArgument("TCPStore: a client needs the server's port, got " +
                          std::to_string(options_.port) + " (port 0 is for is_server only)");
  }
  {
    std::lock_guard<std::timed_mutex> lock(mu_);
    connect_locked(options_.timeout);
  }
  if (options_.num_workers > 0) count_in_worker();
}

TCPStore::~TCPStore() {
  {
    std::lock_guard<std::timed_mutex> lock(mu_);
    disconnect_locked();  // first, or the farewell would wait for this connection too
  }
  if (server_ && (internal::failures_noted_for_peers() != failures_at_start_ || std::uncaught_exceptions() > 0)) {
    server_->stop_after_farewell(internal::kStoreFarewell);
  }
}

void TCPStore::set(const std::string& key, const Bytes& value) {
  call({Command::kSet, {key, value}, timeout_, nullptr, 0});
}

Store::Bytes TCPStore::get(const std::string& key) {
  const std::vector<std::string> keys{key};
  return call({Command::kGet, {key}, timeout_, &keys});
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  const Bytes d = internal::encode_i64(delta);
  return internal::get_i64(call({Command::kAdd, {key, d}, timeout_, nullptr, 8}).data());
}

Store::Bytes TCPStore::compare_set(const std::string& key, const Bytes& expected,
                                   const Bytes& desired) {
  return call({Command::kCompareSet, {key, expected, desired}, timeout_});
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  const Bytes present = call({Command::kCheck, {keys.begin(), keys.end()}, timeout_, nullptr,
                              static_cast<int64_t>(keys.size())});
  for (const uint8_t p : present) {
    if (!p) return false;
  }
  return true;
}

std::vector<std::optional<Store::Bytes>> TCPStore::get_present(const std::vector<std::string>& keys) {
  if (keys.size() >= internal::kMaxFields) {
    throw InvalidArgument("TCPStore::get_present: " + std::to_string(keys.size()) + " keys, at most " +
                          std::to_string(internal::kMaxFields - 1) + " in one request");
  }
  const Bytes reply = call({Command::kGetPresent, {keys.begin(), keys.end()}, timeout_});
  std::vector<std::optional<Bytes>> values(keys.size());
  size_t at = 0;
  auto malformed = [&] {
    return StoreError("TCPStore: the server at " + internal::host_port(options_.host, options_.port) +
                      " sent a malformed GET_PRESENT reply (" + std::to_string(reply.size()) + " bytes for " +
                      std::to_string(keys.size()) + " keys)");
  };
  for (auto& value : values) {
    if (at >= reply.size()) throw malformed();
    if (!reply[at++]) continue;
    if (reply.size() - at < 4) throw malformed();
    const uint32_t n = internal::get_u32(reply.data() + at);
    at += 4;
    if (reply.size() - at < n) throw malformed();
    value.emplace(reply.begin() + static_cast<std::ptrdiff_t>(at), reply.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  if (at != reply.size()) throw malformed();
  return values;
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  // The server ends the wait (WAIT_FOR), so a wait that times out leaves the connection in
  // step: polling in slices, as every init phase does, costs no reconnect and no handshake
  // (which, with 96 ranks on 2 cores, made the server slow enough to be taken for gone).
  // This side gives it kWaitReplyGrace more before it takes the server for stuck.
  if (keys.size() >= internal::kMaxFields) {
    throw InvalidArgument("TCPStore: wait() on " + std::to_string(keys.size()) + " keys; at most " +
                          std::to_string(internal::kMaxFields - 1) + " at once");
  }
  // Beyond a year is for ever, as the server takes it (and the deadlines below cannot overflow).
  const std::chrono::milliseconds t = std::min(resolve(timeout), kWaitForEver);
  const Bytes ms = internal::encode_i64(t.count());
  std::vector<internal::FieldRef> fields{ms};
  fields.insert(fields.end(), keys.begin(), keys.end());
  // "Every key exists" is one byte, 1; "not yet" is 0, then one byte per key, 1 for those
  // that exist, so the Timeout names the missing ones without another round trip.
  std::chrono::milliseconds asked = t;  // what the server was told, when the call deadline cut it
  Request r{Command::kWaitFor, fields, t + kWaitReplyGrace, &keys, -1, t};
  r.server_wait = &asked;
  const Bytes reply = call(r);
  if (reply.size() == 1 && reply[0] == 1) return;
  if (reply.size() != keys.size() + 1 || reply[0] != 0) {
    throw StoreError("TCPStore: " + internal::host_port(options_.host, options_.port) +
                     " sent a malformed reply to WAIT_FOR; is it a TCPStore server of the same version?");
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!reply[i + 1]) missing.push_back(keys[i]);
  }
  // Empty when the keys arrived just after the deadline: name them all. The server answered:
  // a plain Timeout even where the call deadline shortened the wait (a StoreCallCutShort
  // says the store did not answer), naming how long it waited and the scope.
  const Timeout timeout_error = internal::wait_timeout("TCPStore " + internal::host_port(options_.host, options_.port),
                                                       missing.empty() ? keys : missing, asked);
  if (asked >= t) throw timeout_error;
  throw Timeout(timeout_error.what() + scope_suffix(true));
}

bool TCPStore::delete_key(const std::string& key) {
  return call({Command::kDelete, {key}, timeout_, nullptr, 1})[0] != 0;
}

int64_t TCPStore::num_keys() {
  return internal::get_i64(call({Command::kNumKeys, {}, timeout_, nullptr, 8}).data());
}

Store::Bytes TCPStore::call(const Request& asked) {
  Request r = asked;
  const char* name = internal::command_name(r.command);
  // This thread's call deadline (call_deadline.h), when it has one; throws once it passed.
  // Asked before `entry`, so that entry + what was left is never before the deadline.
  const std::optional<std::chrono::milliseconds> scope_left = internal::StoreCallDeadline::time_left(name);
  const auto entry = internal::Clock::now();
  // One request at a time on the connection. A thread behind a request the server does not
  // answer (its process stopped) waits by its own bound, not by that request's; never less
  // than kMinQueueWait, so that a short wait behind an ordinary request does not fail.
  std::chrono::milliseconds queue = std::max(r.queue_timeout.count() >= 0 ? r.queue_timeout : r.timeout, kMinQueueWait);
  if (scope_left) queue = std::min(queue, *scope_left);
  if (std::string why = cut_off_why(); !why.empty()) throw StoreError(why);
  std::unique_lock<std::timed_mutex> lock = unique_lock_until(mu_, entry + queue);
  if (!lock.owns_lock()) {
    const std::string busy = "TCPStore: the connection to " + internal::host_port(options_.host, options_.port) +
                             " stayed busy with another thread's request for the " + internal::format_duration(queue) +
                             " this " + name + " could wait (that request has had no answer yet)";
    if (internal::StoreCallDeadline::has_passed()) {
      throw internal::StoreCallCutShort(busy + scope_suffix(true), internal::StoreCallCutShort::kBehindAnotherRequest);
    }
    throw Timeout(busy);
  }
  if (!gone_.empty()) throw StoreError(gone_);
  if (std::string why = cut_off_why(); !why.empty()) {
    gone_ = std::move(why);
    throw StoreError(gone_);
  }
  // A connect the call deadline ended is a Timeout of the caller's, not the server's loss.
  auto connect = [&](std::chrono::milliseconds usual, bool after_close) {
    try {
      connect_locked(internal::within_call_deadline(std::min({usual, options_.timeout, r.timeout}), name));
    } catch (const StoreRefused&) {
      throw;  // another job's store, a wrong token: said as such, never as a store that has gone
    } catch (const StoreError& e) {
      if (internal::StoreCallDeadline::has_passed()) throw internal::StoreCallCutShort(e.what() + scope_suffix(true));
      if (after_close) {
        gone_ = std::string(e.what()) + " (it had closed this store's connection: taken as gone, not tried again)";
        throw StoreError(gone_);
      }
      throw;
    }
  };
  if (fd_ < 0 && !closed_by_server_) connect(kReconnectTimeout, false);
  if (fd_ < 0) {
    connect(kReconnectAfterCloseTimeout, true);
    closed_by_server_ = false;
  }
  // What the queue and the connect left of the call deadline bounds the request: one
  // deadline for all three. A wait's server is told to end it early enough that its answer
  // comes back by the deadline too (a stopped server costs the caller no more than that).
  Bytes server_wait;
  if (const auto left = internal::StoreCallDeadline::time_left(name); left && *left <= r.timeout) {
    if (*left < kLeastCallTime) {
      // Less than a round trip: a request would only be cut off, and its connection with it.
      throw internal::StoreCallCutShort(std::string("store ") + name + " not made: less than " +
                                        internal::format_duration(kLeastCallTime) + " was left before " +
                                        internal::StoreCallDeadline::scope_name(),
                                        internal::StoreCallCutShort::kNotMade);
    }
    if (r.command == Command::kWaitFor && r.server_wait) {
      const std::chrono::milliseconds told =
          std::min(*r.server_wait, *left - std::min(kBoundedWaitReplyGrace, *left / 4));
      if (told < *r.server_wait) {
        *r.server_wait = told;
        server_wait = internal::encode_i64(told.count());
        r.fields[0] = server_wait;
      }
    }
    r.timeout = *left;
    r.cut_by_scope = true;
  }
  if (!r.cut_by_scope) return call_locked(r);
  try {
    return call_locked(r);
  } catch (const Timeout& e) {
    throw internal::StoreCallCutShort(e.what() + scope_suffix(true));
  }
}

std::string TCPStore::scope_suffix(bool scoped) {
  return scoped ? ", what was left before " + internal::StoreCallDeadline::scope_name() : std::string();
}

Store::Bytes TCPStore::call_locked(const Request& r) {
  const std::string server = internal::host_port(options_.host, options_.port);
  const char* name = internal::command_name(r.command);
  // The server would drop a connection that breaks its limits; say why here instead.
  for (size_t i = 0; i < internal::key_fields(r.command, r.fields.size()); ++i) {
    if (r.fields[i].size > internal::kMaxKeyBytes) {
      throw InvalidArgument("TCPStore: a key of " + std::to_string(r.fields[i].size) +
                            " bytes is over the limit of " +
                            std::to_string(internal::kMaxKeyBytes));
    }
  }
  const Bytes msg = internal::encode_message(static_cast<uint8_t>(r.command), r.fields);
  if (msg.size() > max_request_bytes_) {
    throw InvalidArgument("TCPStore: a " + std::string(name) + " request of " + std::to_string(msg.size()) +
                          " bytes is over the limit of " + std::to_string(max_request_bytes_) + " of the store at " +
                          server + " (TCPStoreLimits::max_buffered_bytes of the process that serves the store: " +
                          "rank 0's, or under distcomm-launch or spawn() the launcher's)");
  }
  const auto deadline = internal::Clock::now() + r.timeout;
  internal::Reply reply;
  IoStatus s = internal::send_all(fd_, msg.data(), msg.size(), deadline);
  if (s == IoStatus::kOk) s = internal::recv_reply(fd_, &reply, internal::kMaxMessageBytes, deadline);
  if (s == IoStatus::kError && errno == EMSGSIZE) {
    disconnect_locked();
    throw StoreError("TCPStore: " + server + " sent a malformed reply to " + name +
                     "; is it a TCPStore server of the same version?");
  }
  if (s != IoStatus::kOk) fail_locked(r, s);
  if (reply.status == internal::Status::kError) {
    const std::string why = to_string(reply.payload);
    if (why.rfind(internal::kJobCannotRun, 0) == 0) throw InvalidArgument("TCPStore: " + server + ": " + why);
    throw StoreError("TCPStore: " + server + ": " + why);
  }
  if (r.reply_size >= 0 && reply.payload.size() != static_cast<size_t>(r.reply_size)) {
    disconnect_locked();
    throw StoreError("TCPStore: " + server + " sent a malformed reply to " + name +
                     "; is it a TCPStore server of the same version?");
  }
  return std::move(reply.payload);
}

void TCPStore::fail_locked(const Request& r, internal::IoStatus s) {
  const int err = errno;
  const std::string server = internal::host_port(options_.host, options_.port);
  const std::string name = internal::command_name(r.command);
  // The connection is out of step (a late reply would answer the next request), so it
  // is closed; the next request opens a new one.
  disconnect_locked();
  // Shut down by cut_off: its why, not the closed socket it left.
  if (std::string why = cut_off_why(); !why.empty()) {
    gone_ = std::move(why);
    throw StoreError(gone_);
  }
  if (s == IoStatus::kTimeout && r.waited && !r.cut_by_scope) {
    const std::optional<std::vector<std::string>> missing = missing_after_timeout(*r.waited);
    if (missing) throw internal::wait_timeout("TCPStore " + server, *missing, r.timeout);
    // Not even a check of the keys got an answer: the server is what is missing, not the
    // keys (a review found "waiting for key 'k'" about a key that existed, on a stopped server).
    std::string keys;
    for (const std::string& k : *r.waited) keys += (keys.empty() ? "'" : ", '") + k + "'";
    throw Timeout("TCPStore: the server at " + server + " sent no reply to " + name + " within " +
                  internal::format_duration(r.timeout) + ", nor to a check of the key" +
                  (r.waited->size() == 1 ? " " : "s ") + keys + " after it: is its process stopped or " +
                  "overloaded, or its host unreachable?");
  }
  if (s == IoStatus::kTimeout) {
    throw Timeout("TCPStore: no reply to " + name + " from " + server + " within " +
                  internal::format_duration(r.timeout));
  }
  if (s == IoStatus::kClosed || (s == IoStatus::kError && (err == ECONNRESET || err == EPIPE))) {
    closed_by_server_ = true;
  }
  if (s == IoStatus::kClosed) {
    throw StoreError("TCPStore: the server at " + server + " closed the connection during " +
                     name + "; did the server process exit?");
  }
  throw StoreError("TCPStore: " + name + " to " + server + " failed: " +
                   internal::errno_message(err));
}

std::optional<std::vector<std::string>> TCPStore::missing_after_timeout(const std::vector<std::string>& keys) {
  try {
    // Within the thread's call deadline, if it has one (a Timeout once it has passed).
    const auto deadline = internal::Clock::now() + internal::within_call_deadline(kMissingKeysTimeout, "CHECK");
    auto left = [&] {
      return std::max(std::chrono::milliseconds(1),
                      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - internal::Clock::now()));
    };
    connect_locked(std::min(left(), options_.timeout));
    const Bytes present = call_locked({Command::kCheck, {keys.begin(), keys.end()}, left(), nullptr,
                                       static_cast<int64_t>(keys.size())});
    std::vector<std::string> missing;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!present[i]) missing.push_back(keys[i]);
    }
    // Empty when the keys arrived just after the deadline: name them all.
    return missing.empty() ? keys : missing;
  } catch (const Error&) {
    return std::nullopt;  // no answer to the check either
  }
}

void TCPStore::connect_locked(std::chrono::milliseconds timeout) {
  disconnect_locked();
  const std::string server = internal::host_port(options_.host, options_.port);
  const auto deadline = internal::Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(10);
  for (bool first = true;; first = false) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - internal::Clock::now());
    internal::Socket s = internal::connect_tcp(options_.host, options_.port,
                                               first ? timeout : std::max(left, std::chrono::milliseconds(1)),
                                               "TCPStore");
    bool closed_early = false;
    const internal::ServerHello hello = internal::client_handshake(
        s.fd(), server, options_.identity, std::min(deadline, internal::Clock::now() + kHandshakeTimeout),
        &closed_early, options_.num_workers);
    if (!closed_early) {
      max_request_bytes_ = hello.max_request_bytes;
      {
        std::lock_guard<std::mutex> cut(cut_mu_);
        fd_ = s.release();
        // Cut off while this connected: the new socket goes the way of the old.
        if (!cut_off_.empty()) ::shutdown(fd_, SHUT_RDWR);
      }
      internal::close_on_fork(fd_);  // a forked child must not hold the connection open
      return;
    }
    // A server flooded with connections closes the oldest ones still in the handshake.
    if (internal::Clock::now() + pause >= deadline) {
      throw StoreError("TCPStore: the store at " + server + " kept closing this connection during the handshake "
                       "for " + internal::format_duration(timeout) + "; is it flooded with connections?");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

void TCPStore::disconnect_locked() {
  std::lock_guard<std::mutex> cut(cut_mu_);
  internal::keep_on_fork(fd_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TCPStore::cut_off(const std::string& why) {
  std::lock_guard<std::mutex> cut(cut_mu_);
  if (!cut_off_.empty()) return;
  cut_off_ = "TCPStore: this client's connection to " + internal::host_port(options_.host, options_.port) +
             internal::kCutOffWords + (why.empty() ? std::string("no reason given") : why);
  // Wakes a request under way (its send or receive ends, the socket closed at this end);
  // the descriptor stays open until that request's thread closes it under mu_.
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

std::string TCPStore::cut_off_why() const {
  std::lock_guard<std::mutex> cut(cut_mu_);
  return cut_off_;
}

void TCPStore::count_in_worker() {
  int64_t joined = add(kInitKey, 1);
  if (!options_.is_server || !options_.wait_for_workers) return;
  // Polled rather than waited on server-side: it happens once per job, and it keeps
  // "init/" the only key the count costs.
  const auto deadline = internal::Clock::now() + options_.timeout;
  auto pause = std::chrono::milliseconds(10);
  while (joined < options_.num_workers) {
    if (internal::Clock::now() >= deadline) {
      throw Timeout("TCPStore: only " + std::to_string(joined) + " of " +
                    std::to_string(options_.num_workers) + " workers connected within " +
                    internal::format_duration(options_.timeout) +
                    "; start the missing ranks or raise the timeout");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
    joined = add(kInitKey, 0);
  }
}

}  // namespace distcomm
