// The key-value half of the TCPStore server's loop: answering requests, parking get() and
// wait() on missing keys, and holding a request whose reply has no room in the buffer
// budget until another connection gives memory back.
#include <algorithm>

#include "api/errors.h"
#include "api/store/server/store_server_loop.h"

namespace distcomm {

using internal::Command;
using internal::FieldRef;
using internal::Message;
using internal::Status;
using Bytes = Store::Bytes;

namespace {

constexpr size_t kReplyHeaderBytes = 5;  // u8 status, u32 length
// Room for a reply that is not a stored value: a count, a flag, an error message.
constexpr size_t kSmallReplyBytes = 512;

std::string key_of(const Bytes& field) { return std::string(field.begin(), field.end()); }

}  // namespace

void TCPStoreServer::Loop::handle(int fd, Client& c, Message m) {
  c.blocked = true;
  c.request = std::move(m);
  c.wait_until = Clock::time_point::max();
  if (static_cast<Command>(c.request.kind) == Command::kWaitFor) {
    // Beyond a year is for ever (and keeps the sum from overflowing); the client clamps alike.
    const int64_t ms = std::clamp<int64_t>(internal::get_i64(c.request.fields[0].data()), 0, int64_t{1} << 35);
    c.wait_until = Clock::now() + std::chrono::milliseconds(ms);
  }
  retry(fd, c);
}

TCPStoreServer::Loop::Clock::time_point TCPStoreServer::Loop::end_expired_waits(Clock::time_point now) {
  Clock::time_point next = Clock::time_point::max();
  std::vector<int> expired;
  for (const auto& [fd, c] : clients_) {
    if (!c->blocked || c->parked_on.empty()) continue;  // only a parked WAIT_FOR has a time
    if (c->wait_until <= now) {
      expired.push_back(fd);
    } else {
      next = std::min(next, c->wait_until);
    }
  }
  for (const int fd : expired) {
    Client& c = *find(fd);
    // 0, then which keys exist.
    Bytes not_yet{0};
    for (size_t i = 1; i < c.request.fields.size(); ++i) {
      not_yet.push_back(map_.contains(key_of(c.request.fields[i])) ? 1 : 0);
    }
    answer_parked(fd, c, Status::kOk, not_yet);
  }
  return next;
}

void TCPStoreServer::Loop::fail_waits() {
  std::vector<int> parked;
  for (const auto& [fd, c] : clients_) {
    if (c->blocked && !c->parked_on.empty()) parked.push_back(fd);
  }
  for (const int fd : parked) answer_parked(fd, *find(fd), Status::kError, job_cannot_run_);
}

void TCPStoreServer::Loop::answer_parked(int fd, Client& c, Status status, FieldRef payload) {
  unpark(fd, c);
  c.request = Message();
  c.blocked = false;
  c.wait_until = Clock::time_point::max();
  try {
    reply(c, status, payload);  // sent when the loop polls it writable
  } catch (const std::exception&) {
    drop(fd);
  }
}

bool TCPStoreServer::Loop::retry(int fd, Client& c) {
  unpark(fd, c);
  c.waiting_for_room = false;
  const auto cmd = static_cast<Command>(c.request.kind);
  if (cmd == Command::kGet || cmd == Command::kWait || cmd == Command::kWaitFor) {
    std::vector<std::string> keys;
    // WAIT_FOR's first field is its timeout.
    for (size_t i = cmd == Command::kWaitFor ? 1 : 0; i < c.request.fields.size(); ++i) {
      keys.push_back(key_of(c.request.fields[i]));
    }
    auto missing = map_.missing(keys);
    if (!missing.empty() && !job_cannot_run_.empty()) {
      c.request = Message();
      c.blocked = false;
      reply(c, Status::kError, job_cannot_run_);
      return true;
    }
    if (!missing.empty()) {
      for (const auto& k : missing) parked_[k].push_back(fd);
      c.parked_on = std::move(missing);
      return false;
    }
  }
  const size_t bound = reply_bound(c.request);
  if (cmd == Command::kGetPresent && bound > max_request_) {
    // Its reply could never be buffered: waiting for room would wait for ever.
    const std::string why = "GET_PRESENT's reply (" + std::to_string(bound) + " bytes for " +
                            std::to_string(c.request.fields.size()) + " keys) exceeds the server's limit of " +
                            std::to_string(max_request_) + " bytes; read fewer keys at a time";
    c.request = Message();
    c.blocked = false;
    reply(c, Status::kError, why);
    return true;
  }
  if (!c.out.reserve(c.out.size() + kReplyHeaderBytes + bound)) {
    c.waiting_for_room = true;
    room_waiters_.push_back(fd);
    return false;
  }
  bool created = false;
  Message m = std::move(c.request);
  c.request = Message();
  c.blocked = false;
  execute(c, m, &created);
  if (created) key_created(key_of(m.fields[0]));
  return true;
}

size_t TCPStoreServer::Loop::reply_bound(const Message& m) const {
  const auto cmd = static_cast<Command>(m.kind);
  if (cmd == Command::kGet) {
    const Bytes* v = map_.find(key_of(m.fields[0]));
    return v ? v->size() : 0;
  }
  if (cmd == Command::kCompareSet) {
    const Bytes* v = map_.find(key_of(m.fields[0]));
    return std::max(v ? v->size() : 0, m.fields[2].size());
  }
  if (cmd == Command::kCheck) return m.fields.size();
  if (cmd == Command::kGetPresent) {
    size_t bytes = 0;
    for (const auto& f : m.fields) {
      const Bytes* v = map_.find(key_of(f));
      bytes += 1 + (v ? 4 + v->size() : 0);
    }
    return bytes;
  }
  // An ADD's error message names the key.
  if (cmd == Command::kAdd) return m.fields[0].size() + kSmallReplyBytes;
  return kSmallReplyBytes;
}

void TCPStoreServer::Loop::execute(Client& c, Message& m, bool* created) {
  const auto cmd = static_cast<Command>(m.kind);
  const std::string key = m.fields.empty() ? std::string() : key_of(m.fields[0]);
  switch (cmd) {
    case Command::kSet:
      *created = map_.set(key, std::move(m.fields[1]));
      reply(c, Status::kOk, Bytes());
      break;
    case Command::kGet:
      reply(c, Status::kOk, *map_.find(key));
      break;
    case Command::kWait:
      reply(c, Status::kOk, Bytes());
      break;
    case Command::kWaitFor:
      reply(c, Status::kOk, Bytes{1});
      break;
    case Command::kAdd:
      try {
        const int64_t v = map_.add(key, internal::get_i64(m.fields[1].data()), created);
        reply(c, Status::kOk, internal::encode_i64(v));
      } catch (const StoreError& e) {
        reply(c, Status::kError, std::string(e.what()));
      }
      break;
    case Command::kCompareSet:
      reply(c, Status::kOk, map_.compare_set(key, m.fields[1], m.fields[2], created));
      break;
    case Command::kCheck: {
      Bytes present;
      for (const auto& f : m.fields) present.push_back(map_.contains(key_of(f)) ? 1 : 0);
      reply(c, Status::kOk, present);
      break;
    }
    case Command::kGetPresent: {
      Bytes out;
      out.reserve(reply_bound(m));
      for (const auto& f : m.fields) {
        const Bytes* v = map_.find(key_of(f));
        out.push_back(v ? 1 : 0);
        if (!v) continue;
        internal::put_u32(&out, static_cast<uint32_t>(v->size()));
        out.insert(out.end(), v->begin(), v->end());
      }
      reply(c, Status::kOk, out);
      break;
    }
    case Command::kDelete:
      reply(c, Status::kOk, Bytes{static_cast<uint8_t>(map_.erase(key) ? 1 : 0)});
      break;
    case Command::kNumKeys:
      reply(c, Status::kOk, internal::encode_i64(map_.size()));
      break;
    case Command::kHello:
    case Command::kProve:
      break;  // validate_request refused them
  }
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
  if (options_.on_created && key.compare(0, options_.created_prefix.size(), options_.created_prefix) == 0) {
    const Bytes* value = map_.find(key);
    if (value) options_.on_created(key, std::string(value->begin(), value->end()));
  }
  auto it = parked_.find(key);
  if (it == parked_.end()) return;
  const std::vector<int> waiting = std::move(it->second);
  parked_.erase(it);
  for (const int fd : waiting) {
    Client* c = find(fd);
    if (c && c->blocked && !c->waiting_for_room && retry(fd, *c)) runnable_.push_back(fd);
  }
}

void TCPStoreServer::Loop::wake_room_waiters() {
  if (room_waiters_.empty() || pool_.releases() == releases_seen_) return;
  releases_seen_ = pool_.releases();
  const std::vector<int> waiting = std::move(room_waiters_);
  room_waiters_.clear();
  for (const int fd : waiting) {
    Client* c = find(fd);
    if (!c || !c->waiting_for_room) continue;
    try {
      if (retry(fd, *c)) serve(fd);
    } catch (const std::exception&) {
      drop(fd);
    }
  }
}

void TCPStoreServer::Loop::reply(Client& c, Status s, FieldRef field) {
  // retry() made room for the requests' replies; the handshake's are small.
  if (!c.out.reserve(c.out.size() + kReplyHeaderBytes + field.size)) {
    throw StoreError("TCPStoreServer: no room for a reply of " + std::to_string(field.size) + " bytes");
  }
  if (c.out.size() == 0) c.out_since = Clock::now();
  // Header and value straight into the buffer: a big value is not copied twice.
  const Bytes header = internal::encode_reply_header(s, field.size);
  c.out.append(header.data(), header.size());
  c.out.append(field.data, field.size);
}

}  // namespace distcomm
