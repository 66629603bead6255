#include "launch/rendezvous_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "api/errors.h"
#include "api/store/internal/name_lookup.h"
#include "api/store/tcp_store.h"
#include "launch/duration_text.h"

namespace distcomm {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

// host:port's addresses, looked up within `wait` (name_lookup.h): a DNS server that does
// not answer would otherwise hold the launcher for the resolver's timeouts.
internal::NameLookup addresses_of(const std::string& host, int port, std::chrono::milliseconds wait) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  return internal::look_up(host, std::to_string(port), hints, Clock::now() + wait);
}

// Whether host names an address of this machine: binding a socket to it (port 0) works. A
// name not looked up within `wait` is an error: taken for another machine's, the endpoint's
// own launcher would serve no store, and every launcher would wait out its timeout blaming
// the endpoint's host.
bool is_this_host(const std::string& host, std::chrono::milliseconds wait) {
  bool local = false;
  const internal::NameLookup found = addresses_of(host, 0, wait);
  if (found.timed_out) {
    throw std::runtime_error("cannot tell whether this host is the rendezvous endpoint '" + host + "': " +
                             found.error + " (--rdzv_timeout_s)");
  }
  for (const addrinfo* a = found.found.get(); a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    local = local || ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    ::close(fd);
  }
  return local;
}

// Whether something accepts TCP connections at host:port within `wait`; `error` says what
// went wrong otherwise.
bool accepts_connections(const std::string& host, int port, std::chrono::milliseconds wait, std::string* error) {
  bool ok = false;
  const internal::NameLookup found = addresses_of(host, port, wait);
  if (!found.found) *error = "cannot resolve '" + host + "': " + found.error;
  for (const addrinfo* a = found.found.get(); a != nullptr && !ok; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      if (::poll(&p, 1, static_cast<int>(wait.count())) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0) {
        ok = err == 0;
        if (!ok) *error = std::strerror(err);
      } else {
        *error = "no answer within " + seconds_text(wait);
      }
    } else {
      *error = std::strerror(errno);
    }
    ::close(fd);
  }
  return ok;
}

}  // namespace

RendezvousEndpoint::RendezvousEndpoint(const ElasticOptions& options, const std::string& token)
    : options_(options), identity_{"rdzv-" + options.rdzv_id, token} {
  if (!is_this_host(options.endpoint_host, options.timeout)) return;
  TCPStoreServerOptions server;
  server.bind_address = options.endpoint_host;
  server.port = options.endpoint_port;
  server.identity = identity_;
  auto candidate = std::make_unique<TCPStoreServer>(server);
  try {
    candidate->start();
    server_ = std::move(candidate);
  } catch (const StoreError&) {
    // The port is taken: most likely by the launcher of this job that serves the store
    // (connect() finds out, and says so when it is another job or another program).
  }
}

RendezvousEndpoint::~RendezvousEndpoint() {
  if (server_) server_->stop();
}

std::unique_ptr<Store> RendezvousEndpoint::connect(const std::function<bool()>& interrupted,
                                                   const std::function<void(const std::string&)>& say) {
  const std::string endpoint = "--rdzv_endpoint=" + options_.endpoint_host + ":" + std::to_string(options_.endpoint_port);
  const auto start = Clock::now();
  const auto deadline = start + options_.timeout;
  auto next_word = start + std::chrono::seconds(10);
  std::string error;
  int tries = 0;
  while (!accepts_connections(options_.endpoint_host, options_.endpoint_port, std::chrono::milliseconds(500), &error)) {
    ++tries;
    if (interrupted()) return nullptr;
    if (say && Clock::now() >= next_word && Clock::now() < deadline) {
      say(endpoint + ": no rendezvous store there yet (" + error + ") after " + seconds_text(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)) +
          "; trying until --rdzv_timeout_s=" + seconds_text(options_.timeout) +
          " (is the launcher of the endpoint's host running?)");
      next_word = Clock::now() + std::chrono::seconds(30);
    }
    if (Clock::now() >= deadline) {
      throw std::runtime_error(endpoint + ": cannot reach the rendezvous store: " + std::to_string(tries) +
                               " connection attempts in " + seconds_text(options_.timeout) +
                               " (--rdzv_timeout_s), the last one: " + error +
                               "; is the launcher of the endpoint's host running?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  try {
    return connect_again();
  } catch (const Error& e) {
    throw std::runtime_error(endpoint + ": the rendezvous store refused this launcher: " + e.what());
  }
}

std::unique_ptr<Store> RendezvousEndpoint::connect_again() const {
  TCPStoreOptions client;
  client.host = options_.endpoint_host;
  client.port = options_.endpoint_port;
  client.identity = identity_;
  client.timeout = std::chrono::seconds(10);
  return std::make_unique<TCPStore>(client);
}

}  // namespace launch
}  // namespace distcomm
