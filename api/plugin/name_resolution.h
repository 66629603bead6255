// Looking a host name up with a deadline, for plugins (ABI 1.8).
//
// getaddrinfo has no deadline of its own: a DNS server that does not answer holds it for
// resolv.conf's timeouts, 20 s with glibc's defaults and minutes with search domains, past
// any init deadline. The core looks names up on a thread of its own that the caller leaves
// at its deadline (store/internal/name_lookup.h); this is that, for a backend: its own
// address, the master's.
//
// distcomm_resolve is weak, as every core entry point added after ABI 1.0 (plugin.h): a plugin
// built with this header still loads in a core that predates it, where resolve_by falls back
// to a plain getaddrinfo (no deadline, as before).
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

extern "C" {

// One address found.
struct distcomm_address {
  sockaddr_storage address;
  socklen_t length;
};

// host:service (either may be empty; an empty host is the loopback) looked up within wait_ms, with getaddrinfo's hints
// family (AF_UNSPEC, AF_INET, AF_INET6) and socktype. Writes up to `max` addresses, in
// getaddrinfo's order, and returns how many it found (it may be more than max); -1 when the
// lookup failed or ran out of time, with why in `error` (NUL-terminated, cut to
// error_size), and *timed_out set in the second case.
int distcomm_resolve(const char* host, const char* service, int family, int socktype, int64_t wait_ms,
                     distcomm_address* out, int max, char* error, size_t error_size, int* timed_out) noexcept
    __attribute__((weak));

}  // extern "C"

namespace distcomm {

struct Resolved {
  std::vector<distcomm_address> addresses;  // empty when the lookup failed
  std::string error;                        // why, then
  bool timed_out = false;                   // the deadline came first
};

// distcomm_resolve by `deadline`, or a plain getaddrinfo in a core without it.
inline Resolved resolve_by(const std::string& host, const std::string& service, int family, int socktype,
                           std::chrono::steady_clock::time_point deadline) {
  constexpr int kMax = 16;
  Resolved r;
  if (distcomm_resolve) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    distcomm_address found[kMax];
    char error[512] = {0};
    int timed_out = 0;
    const int n = distcomm_resolve(host.c_str(), service.c_str(), family, socktype,
                                   left.count() > 0 ? static_cast<int64_t>(left.count()) : 0, found, kMax, error,
                                   sizeof(error), &timed_out);
    if (n < 0) {
      r.error = error;
      r.timed_out = timed_out != 0;
    } else {
      r.addresses.assign(found, found + (n < kMax ? n : kMax));
    }
    return r;
  }
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = socktype;
  addrinfo* list = nullptr;
  // An empty host is the loopback, as in the core's lookup.
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.empty() ? nullptr : service.c_str(),
                               &hints, &list);
  if (rc != 0) {
    r.error = ::gai_strerror(rc);
    return r;
  }
  for (const addrinfo* a = list; a != nullptr && r.addresses.size() < static_cast<size_t>(kMax); a = a->ai_next) {
    distcomm_address d{};
    std::memcpy(&d.address, a->ai_addr, a->ai_addrlen);
    d.length = a->ai_addrlen;
    r.addresses.push_back(d);
  }
  ::freeaddrinfo(list);
  return r;
}

}  // namespace distcomm
