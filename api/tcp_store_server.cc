#include "api/tcp_store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/errors.h"
#include "api/internal/key_value_map.h"
#include "api/internal/socket.h"
#include "api/internal/store_protocol.h"

namespace distcomm {

using internal::Command;
using internal::FieldRef;
using internal::Message;
using internal::Socket;
using internal::Status;
using Bytes = Store::Bytes;

namespace {

constexpr size_t kReadChunk = size_t{64} << 10;
// Our clients send one request at a time, so more than one whole message buffered from a
// client means it is not one of ours: stop reading it until it is served.
constexpr size_t kMaxBufferedIn = internal::kMaxMessageBytes + kReadChunk;
// Requests are not served while this much of a client's replies is unsent, so that a
// client asking for big values without reading them cannot grow the server's memory.
constexpr size_t kMaxBufferedOut = size_t{1} << 20;
// Buffers that grew for a big value are given back once empty.
constexpr size_t kKeepCapacity = size_t{1} << 20;

std::string key_of(const Bytes& field) { return std::string(field.begin(), field.end()); }

void release_if_large(Bytes* b) {
  if (b->empty() && b->capacity() > kKeepCapacity) Bytes().swap(*b);
}

}  // namespace

class TCPStoreServer::Loop {
 public:
  explicit Loop(Socket listener);
  void run();
  // Callable from any thread: makes run() return.
  void wake();

 private:
  struct Client {
    Socket sock;
    Bytes in;
    Bytes out;
    size_t out_sent = 0;
    // The GET or WAIT held until its keys exist, and the keys it is parked on.
    bool blocked = false;
    Message request;
    std::vector<std::string> parked_on;
  };

  void accept_clients();
  void on_readable(int fd);
  void on_writable(int fd);
  // Answers the client's buffered requests until it blocks, or its replies pile up.
  void serve(int fd);
  void handle(int fd, Client& c, Message m);
  // Answers the held request when its keys exist, else parks the client on them.
  void try_unblock(int fd, Client& c);
  void unpark(int fd, Client& c);
  void key_created(const std::string& key);
  void reply(Client& c, Status s, FieldRef field);
  bool flush(int fd, Client& c);
  void drop(int fd);

  Socket listener_;
  Socket wake_read_;
  Socket wake_write_;
  internal::KeyValueMap map_;
  std::unordered_map<int, Client> clients_;
  std::unordered_map<std::string, std::vector<int>> parked_;
  // Clients unblocked by another client's request; served after the current event so
  // that one SET waking many waiters does not recurse.
  std::vector<int> runnable_;
};

TCPStoreServer::Loop::Loop(Socket listener) : listener_(std::move(listener)) {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw StoreError("TCPStoreServer: cannot create its wake-up pipe: " +
                     internal::errno_message(errno));
  }
  wake_read_.reset(p[0]);
  wake_write_.reset(p[1]);
}

void TCPStoreServer::Loop::wake() {
  const char b = 0;
  // A full pipe already holds a wake-up; nothing to do on failure.
  [[maybe_unused]] ssize_t r = write(wake_write_.fd(), &b, 1);
}

void TCPStoreServer::Loop::run() {
  std::vector<pollfd> fds;
  while (true) {
    fds.clear();
    fds.push_back({wake_read_.fd(), POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (const auto& [fd, c] : clients_) {
      short events = 0;
      if (c.out_sent < c.out.size()) {
        events = POLLOUT;
      } else if (c.in.size() < kMaxBufferedIn) {
        events = POLLIN;
      }
      fds.push_back({fd, events, 0});
    }
    if (poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR; poll has no other to retry
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) {
      try {
        accept_clients();
      } catch (const std::exception&) {
        // Out of memory for a new client: it was closed; serve the ones we have.
      }
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
    while (!runnable_.empty()) {
      const int fd = runnable_.back();
      runnable_.pop_back();
      try {
        serve(fd);
      } catch (const std::exception&) {
        drop(fd);
      }
    }
  }
}

void TCPStoreServer::Loop::accept_clients() {
  while (true) {
    const int fd = accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      internal::set_nodelay(fd);
      clients_[fd].sock = std::move(s);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      // The listener stays readable while the backlog waits: pause rather than spin.
      usleep(10000);
    }
    return;
  }
}

void TCPStoreServer::Loop::on_readable(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  Client& c = it->second;
  // POLLIN is only asked for while the buffer is below its bound, so there is room.
  const size_t old = c.in.size();
  const size_t room = std::min(kReadChunk, kMaxBufferedIn - old);
  c.in.resize(old + room);
  const ssize_t r = recv(fd, c.in.data() + old, room, MSG_DONTWAIT);
  const int err = errno;
  c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(r, 0)));
  if (r > 0) {
    serve(fd);
  } else if (r == 0 || (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)) {
    drop(fd);
  }
}

void TCPStoreServer::Loop::on_writable(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  if (!flush(fd, it->second)) {
    drop(fd);
  } else if (it->second.out.empty()) {
    serve(fd);
  }
}

void TCPStoreServer::Loop::serve(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  Client& c = it->second;
  size_t pos = 0;
  while (!c.blocked && c.out.size() - c.out_sent < kMaxBufferedOut && pos < c.in.size()) {
    const uint8_t* data = c.in.data() + pos;
    const size_t size = c.in.size() - pos;
    Message m;
    size_t used = 0;
    std::string error;
    // An unknown command byte is refused at once, not after waiting for a length.
    const auto r = internal::is_command(data[0])
                       ? internal::parse_message(data, size, &m, &used, &error)
                       : internal::ParseResult::kInvalid;
    if (r == internal::ParseResult::kIncomplete) break;
    if (r == internal::ParseResult::kInvalid || !internal::validate_request(m).empty()) {
      drop(fd);
      return;
    }
    pos += used;
    handle(fd, c, std::move(m));
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
  release_if_large(&c.in);
  if (!flush(fd, c)) drop(fd);
}

void TCPStoreServer::Loop::handle(int fd, Client& c, Message m) {
  const auto cmd = static_cast<Command>(m.kind);
  const std::string key = m.fields.empty() ? std::string() : key_of(m.fields[0]);
  bool created = false;
  switch (cmd) {
    case Command::kSet:
      created = map_.set(key, std::move(m.fields[1]));
      reply(c, Status::kOk, Bytes());
      break;
    case Command::kGet:
    case Command::kWait:
      c.blocked = true;
      c.request = std::move(m);
      try_unblock(fd, c);
      break;
    case Command::kAdd:
      try {
        const int64_t v = map_.add(key, internal::get_i64(m.fields[1].data()), &created);
        reply(c, Status::kOk, internal::encode_i64(v));
      } catch (const StoreError& e) {
        reply(c, Status::kError, std::string(e.what()));
      }
      break;
    case Command::kCompareSet:
      reply(c, Status::kOk, map_.compare_set(key, m.fields[1], m.fields[2], &created));
      break;
    case Command::kCheck: {
      Bytes present;
      for (const auto& f : m.fields) present.push_back(map_.contains(key_of(f)) ? 1 : 0);
      reply(c, Status::kOk, present);
      break;
    }
    case Command::kDelete:
      reply(c, Status::kOk, Bytes{static_cast<uint8_t>(map_.erase(key) ? 1 : 0)});
      break;
    case Command::kNumKeys:
      reply(c, Status::kOk, internal::encode_i64(map_.size()));
      break;
  }
  if (created) key_created(key);
}

void TCPStoreServer::Loop::try_unblock(int fd, Client& c) {
  std::vector<std::string> keys;
  for (const auto& f : c.request.fields) keys.push_back(key_of(f));
  unpark(fd, c);
  auto missing = map_.missing(keys);
  if (!missing.empty()) {
    for (const auto& k : missing) parked_[k].push_back(fd);
    c.parked_on = std::move(missing);
    return;
  }
  if (static_cast<Command>(c.request.kind) == Command::kGet) {
    reply(c, Status::kOk, *map_.find(keys[0]));
  } else {
    reply(c, Status::kOk, Bytes());
  }
  c.blocked = false;
  c.request = Message();
  runnable_.push_back(fd);
}

void TCPStoreServer::Loop::unpark(int fd, Client& c) {
  for (const auto& k : c.parked_on) {
    auto it = parked_.find(k);
    if (it == parked_.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), fd), v.end());
    if (v.empty()) parked_.erase(it);
  }
  c.parked_on.clear();
}

void TCPStoreServer::Loop::key_created(const std::string& key) {
  auto it = parked_.find(key);
  if (it == parked_.end()) return;
  const std::vector<int> waiting = std::move(it->second);
  parked_.erase(it);
  for (const int fd : waiting) {
    auto c = clients_.find(fd);
    if (c != clients_.end() && c->second.blocked) try_unblock(fd, c->second);
  }
}

void TCPStoreServer::Loop::reply(Client& c, Status s, FieldRef field) {
  const Bytes r = internal::encode_reply(s, field);
  c.out.insert(c.out.end(), r.begin(), r.end());
}

bool TCPStoreServer::Loop::flush(int fd, Client& c) {
  while (c.out_sent < c.out.size()) {
    const ssize_t r = send(fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      c.out_sent += static_cast<size_t>(r);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return true;
    } else if (errno != EINTR) {
      return false;
    }
  }
  c.out.clear();
  c.out_sent = 0;
  release_if_large(&c.out);
  return true;
}

void TCPStoreServer::Loop::drop(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  unpark(fd, it->second);
  clients_.erase(it);
}

TCPStoreServer::TCPStoreServer(std::string host, int port) : host_(std::move(host)), port_(port) {}

TCPStoreServer::~TCPStoreServer() { stop(); }

void TCPStoreServer::start() {
  if (loop_) throw StoreError("TCPStoreServer: already started on port " + std::to_string(port_));
  Socket listener = internal::listen_tcp(host_, port_);
  port_ = internal::local_port(listener.fd());
  loop_ = std::make_unique<Loop>(std::move(listener));
  thread_ = std::thread([this] { loop_->run(); });
}

void TCPStoreServer::stop() {
  if (!loop_) return;
  loop_->wake();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
}

}  // namespace distcomm
