#include "api/store/internal/socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "api/errors.h"
#include "api/store/internal/close_on_fork.h"
#include "api/store/internal/key_value_map.h"
#include "api/store/internal/name_lookup.h"

namespace distcomm {
namespace internal {

namespace {

// Resolves host:port by `deadline` (name_lookup.h).
NameLookup resolve(const std::string& host, int port, int flags, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags | AI_NUMERICSERV;
  return look_up(host, std::to_string(port), hints, deadline);
}

// Milliseconds left until deadline, rounded up so that poll() does not wake early.
int poll_ms(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// Waits until fd is ready for `events`. False when the deadline passed first.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, poll_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the next send/recv report the error
  }
}

// One attempt on one address. Returns the connected socket, or an invalid one with
// *error set.
Socket try_connect(const addrinfo& a, Clock::time_point deadline, std::string* error) {
  Socket s(socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC, a.ai_protocol));
  if (!s.valid()) {
    *error = errno_message(errno);
    return Socket();
  }
  // Non-blocking connect, so that an unreachable host gives up at the deadline rather
  // than after the kernel's SYN retries.
  set_nonblocking(s.fd());
  int rc = connect(s.fd(), a.ai_addr, a.ai_addrlen);
  int err = rc == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    if (!wait_ready(s.fd(), POLLOUT, deadline)) {
      *error = errno_message(ETIMEDOUT);
      return Socket();
    }
    socklen_t len = sizeof(err);
    if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  }
  if (err != 0) {
    *error = errno_message(err);
    return Socket();
  }
  const int flags = fcntl(s.fd(), F_GETFL);
  fcntl(s.fd(), F_SETFL, flags & ~O_NONBLOCK);
  set_nodelay(s.fd());
  return s;
}

bool is_loopback(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  }
  if (a->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&v6) ||
           (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

}  // namespace

std::string peer_name(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return host_port(host, std::atoi(port));
}

bool bound_to_loopback(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  return getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
         is_loopback(reinterpret_cast<sockaddr*>(&addr));
}

bool is_numeric_address(const std::string& host) {
  in6_addr v6{};
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

void Socket::reset(int fd) {
  if (fd_ >= 0) {
    keep_on_fork(fd_);
    ::close(fd_);
  }
  fd_ = fd;
  close_on_fork(fd_);
}

int Socket::release() {
  keep_on_fork(fd_);
  return std::exchange(fd_, -1);
}

std::string errno_message(int err) {
  char buf[256];
  // The GNU strerror_r returns the message, which need not be in buf.
  return strerror_r(err, buf, sizeof(buf));
}

std::string host_port(const std::string& host, int port) {
  const std::string h = host.empty() ? "*" : host;
  // An IPv6 literal needs brackets, or its colons run into the port's.
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port);
}

Socket listen_tcp(const std::string& host, int port, const std::string& named_by) {
  const std::string where = "TCPStoreServer: cannot listen on " + host_port(host, port) + ": ";
  std::string error;
  // A server has no deadline of its own to start by; its bind address is the wildcard or a
  // numeric one in practice (DISTCOMM_STORE_BIND), which needs no DNS. A name's lookup is
  // bounded all the same, by a minute, not left to the resolver's retries.
  const NameLookup lookup = resolve(host, port, AI_PASSIVE, Clock::now() + std::chrono::minutes(1));
  if (!lookup.found) throw StoreError(where + lookup.error);
  const std::shared_ptr<const addrinfo>& list = lookup.found;
  // For the wildcard, glibc lists 0.0.0.0 before ::. A dual-stack :: serves both
  // families, so try IPv6 first and keep 0.0.0.0 for machines without IPv6.
  std::vector<const addrinfo*> addrs;
  for (const addrinfo* a = list.get(); a; a = a->ai_next) addrs.push_back(a);
  if (host.empty()) {
    std::stable_sort(addrs.begin(), addrs.end(), [](const addrinfo* x, const addrinfo* y) {
      return x->ai_family == AF_INET6 && y->ai_family != AF_INET6;
    });
  } else {
    // A host name can resolve to loopback as well as to the address other hosts use
    // (Debian maps its own name to 127.0.1.1): ranks elsewhere need the latter.
    std::stable_sort(addrs.begin(), addrs.end(), [](const addrinfo* x, const addrinfo* y) {
      return !is_loopback(x->ai_addr) && is_loopback(y->ai_addr);
    });
  }
  int last_errno = 0;
  for (const addrinfo* a : addrs) {
    Socket s(socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      error = errno_message(errno);
      continue;
    }
    // A restarted server must be able to take its port back while old connections
    // linger in TIME_WAIT.
    const int one = 1, zero = 0;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6 && host.empty()) {
      setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (bind(s.fd(), a->ai_addr, a->ai_addrlen) != 0 || listen(s.fd(), SOMAXCONN) != 0) {
      last_errno = errno;
      error = errno_message(errno);
      continue;
    }
    return s;
  }
  if (last_errno == EADDRINUSE) {
    error += "; another job (or another program) is using port " + std::to_string(port) +
             ": give each job its own MASTER_PORT";
  } else if (last_errno == EADDRNOTAVAIL && !named_by.empty()) {
    error += "; '" + host + "', from " + named_by + ", is not an address of this host: give it one of this "
             "host's addresses, '*' for every interface, or leave it unset to listen on MASTER_ADDR's";
  } else if (last_errno == EADDRNOTAVAIL) {
    error += "; '" + host + "' is not an address of this host: the job's store listens on MASTER_ADDR, which "
             "must name the host that serves it, rank 0's or (tools/launch) node 0's (or set DISTCOMM_STORE_BIND)";
  }
  throw StoreError(where + error);
}

int local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw StoreError("TCPStoreServer: getsockname failed: " + errno_message(errno));
  }
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

Socket connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout,
                   const std::string& who, bool* name_unknown) {
  const auto deadline = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(10);
  std::string error = errno_message(ETIMEDOUT);
  bool attempted = false;  // whether `error` says what an attempt met
  while (true) {
    // Resolve on every attempt: the server's name may appear in DNS after we start (a
    // Kubernetes service publishes a pod's name once it is ready, while the other pods
    // already wait for it), and a DNS server that failed for now (EAI_AGAIN) or did not
    // answer may answer the next time. So even a definite "no such name" is retried; it is
    // said in getaddrinfo's words, and *name_unknown lets the caller say so at once.
    const NameLookup lookup = resolve(host, port, 0, deadline);
    if (name_unknown && (lookup.found || lookup.no_such_name)) *name_unknown = lookup.no_such_name;
    // A lookup that the deadline cut short says less than what an earlier attempt met
    // (refused, or the resolver's own failure).
    if (!lookup.found && !(lookup.timed_out && attempted)) error = lookup.error;
    attempted = true;
    for (const addrinfo* a = lookup.found.get(); a; a = a->ai_next) {
      Socket s = try_connect(*a, deadline, &error);
      if (s.valid()) return s;
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  throw StoreError(who + ": cannot connect to " + host_port(host, port) + " after " +
                   format_duration(timeout) + ": " + error);
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void set_nodelay(int fd) {
  // Requests are small and synchronous: Nagle would only add latency.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

IoStatus send_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLOUT, deadline)) return IoStatus::kTimeout;
    } else if (errno == EPIPE || errno == ECONNRESET) {
      return IoStatus::kClosed;
    } else if (errno != EINTR) {
      return IoStatus::kError;
    }
  }
  return IoStatus::kOk;
}

IoStatus recv_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r == 0 || errno == ECONNRESET) {
      return IoStatus::kClosed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLIN, deadline)) return IoStatus::kTimeout;
    } else if (errno != EINTR) {
      return IoStatus::kError;
    }
  }
  return IoStatus::kOk;
}

}  // namespace internal
}  // namespace distcomm
