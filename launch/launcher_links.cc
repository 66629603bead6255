#include "launch/launcher_links.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "api/store/internal/name_lookup.h"

namespace distcomm {
namespace launch {

AlivePort::AlivePort() {
  fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_any;
  const int zero = 0;
  socklen_t len = sizeof(addr);
  const bool ok = fd_ >= 0 && ::setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) == 0 &&
                  ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(fd_, SOMAXCONN) == 0 &&
                  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (!ok) {
    const int err = errno;
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error(std::string("cannot listen for the other launchers: ") + std::strerror(err));
  }
  port_ = ntohs(addr.sin6_port);
}

AlivePort::~AlivePort() { ::close(fd_); }

LauncherLinks::~LauncherLinks() {
  for (int fd : fds_) ::close(fd);
}

bool LauncherLinks::add(const std::string& id, const std::string& host, int port) {
  for (const std::string& known : ids_) {
    if (known == id) return true;
  }
  // The lookup and each connect within kLinkWaitMs: a peer's host whose name its DNS server
  // does not answer for is as unreachable as one that does not accept.
  constexpr int kLinkWaitMs = 2000;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  const internal::NameLookup found = internal::look_up(
      host, std::to_string(port), hints, std::chrono::steady_clock::now() + std::chrono::milliseconds(kLinkWaitMs));
  int connected = -1;
  for (const addrinfo* a = found.found.get(); a != nullptr && connected < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!ok && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      ok = ::poll(&p, 1, kLinkWaitMs) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    if (ok) {
      connected = fd;
    } else {
      ::close(fd);
    }
  }
  if (connected < 0) return false;
  ids_.push_back(id);
  fds_.push_back(connected);
  return true;
}

std::vector<std::string> LauncherLinks::ended(const std::vector<std::string>& among, int timeout_ms) const {
  std::vector<pollfd> fds;
  std::vector<std::string> ids;
  for (size_t i = 0; i < ids_.size(); ++i) {
    for (const std::string& id : among) {
      if (id != ids_[i]) continue;
      fds.push_back(pollfd{fds_[i], POLLIN, 0});
      ids.push_back(id);
    }
  }
  std::vector<std::string> gone;
  if (fds.empty()) {
    if (timeout_ms > 0) ::poll(nullptr, 0, timeout_ms);
    return gone;
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return gone;
  // Nothing is ever sent on these connections: anything readable is their end.
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) gone.push_back(ids[i]);
  }
  return gone;
}

}  // namespace launch
}  // namespace distcomm
