#include "backends/gloo/gloo_device.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <gloo/transport/tcp/device.h>

#include "api/errors.h"

namespace distcomm {
namespace gloo {
namespace {

bool is_loopback_name(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// gloo reports a bad interface or address with its own exception types; say which setting
// was wrong and what to do instead.
// gloo's device looks a hostname up with getaddrinfo and checks only for -1, which it never
// returns: a name that does not resolve sends it walking an unset list (SIGSEGV). So the
// name is resolved here first, and a failure is ours to report.
void check_resolves(const std::string& hostname, const std::string& what) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(hostname.c_str(), nullptr, &hints, &found);
  if (found) ::freeaddrinfo(found);
  if (rc != 0 || !found) {
    throw InvalidArgument("gloo cannot listen on " + what + ": '" + hostname + "' does not resolve (" +
                          ::gai_strerror(rc) + "); give an address of this host, or set DISTCOMM_SOCKET_IFNAME "
                          "(config 'ifname') to an interface that reaches the other ranks");
  }
}

std::shared_ptr<::gloo::transport::Device> make_device(const ::gloo::transport::tcp::attr& attr,
                                                       const std::string& what) {
  if (!attr.hostname.empty()) check_resolves(attr.hostname, what);
  try {
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw InvalidArgument("gloo cannot listen on " + what + ": " + e.what() +
                          "; set DISTCOMM_SOCKET_IFNAME (config 'ifname') to an interface that "
                          "reaches the other ranks");
  }
}

}  // namespace

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0) {
    throw InvalidArgument("cannot resolve master address '" + host + "': " + gai_strerror(rc));
  }
  std::string result;
  std::string last_error = "no address";
  for (addrinfo* a = found; a && result.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    // connect() on a datagram socket only looks up the route and fixes the source address.
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* raw = local.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, raw, text, sizeof(text))) result = text;
    } else {
      last_error = std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (result.empty()) throw InvalidArgument("no route to master address '" + host + "': " + last_error);
  return result;
}

std::shared_ptr<::gloo::transport::Device> create_tcp_device(const GlooConfig& config, std::string* chosen) {
  ::gloo::transport::tcp::attr attr;
  if (const std::string& ifname = config.ifname; !ifname.empty()) {
    attr.iface = ifname;
    *chosen = "interface " + ifname + " (config 'ifname')";
    return make_device(attr, *chosen);
  }
  if (const std::string& hostname = config.hostname; !hostname.empty()) {
    attr.hostname = hostname;
    *chosen = "address " + hostname + " (config 'hostname')";
    return make_device(attr, *chosen);
  }
  if (const std::string& master = config.master_addr; !master.empty()) {
    attr.hostname = is_loopback_name(master) ? "127.0.0.1" : local_address_towards(master);
    *chosen = "address " + attr.hostname + " (the route to master " + master + ")";
    return make_device(attr, *chosen);
  }
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
    attr.hostname = name;
    try {
      check_resolves(name, std::string("host name ") + name);
      auto device = ::gloo::transport::tcp::CreateDevice(attr);
      *chosen = std::string("host name ") + name + " (no ifname, hostname or master_addr given)";
      return device;
    } catch (const std::exception&) {
      // The name does not resolve to an address of this host (common in containers).
    }
  }
  attr.hostname = "127.0.0.1";
  *chosen = "127.0.0.1 (no ifname, hostname or master_addr given; this host's name does not resolve)";
  return make_device(attr, *chosen);
}

}  // namespace gloo
}  // namespace distcomm
