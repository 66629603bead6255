#include "backends/gloo/gloo_device.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <gloo/transport/tcp/device.h>

#include "api/errors.h"
#include "api/plugin/name_resolution.h"
#include "backends/gloo/gloo_limits.h"

namespace distcomm {
namespace gloo {
namespace {

bool is_loopback_name(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

using Clock = std::chrono::steady_clock;

// An address as text that getaddrinfo reads back without DNS. An IPv6 link-local address
// loses its interface (scope id), as it did when this code passed inet_ntop's text to gloo
// before: its scope id means nothing on the peers' hosts, so such an address is not one to
// listen on without an 'ifname'.
std::string numeric_text(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = a.ss_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&a)->sin_addr)
                        : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr);
  return ::inet_ntop(a.ss_family, raw, text, sizeof(text)) ? text : "";
}

// A socket this process could not open for lack of descriptors or of the kernel's memory:
// that limit is the cause, not the address (an Error, not InvalidArgument: no setting of the
// group is wrong).
void throw_if_limit(const std::string& what, int err) {
  if (socket_limit_of_errno(err) == LimitKind::kNone) return;
  if (auto text = limit_failure(what, std::string("socket: ") + std::strerror(err))) throw Error(*text);
}

// What a lookup that found nothing says: why, and for a deadline, which one.
std::string lookup_failure(const Resolved& r) {
  return r.error + (r.timed_out ? " (by the group's init deadline)" : "");
}

// The address gloo's device would listen on for `hostname` -- the first of its addresses
// a socket binds to, as gloo picks it -- as a numeric address, looked up by `deadline`.
// gloo's device looks a name up again, with no deadline (a DNS server that does not answer
// would hold it for the resolver's timeouts), and checks getaddrinfo only for -1, which it
// never returns: a name that does not resolve sends it walking an unset list (SIGSEGV). So
// the name is resolved here, a failure is ours to report, and gloo gets no name to look up.
// *timed_out (when given): whether the failure was the deadline's.
std::string listen_address_of(const std::string& hostname, const std::string& what, Clock::time_point deadline,
                              bool* timed_out = nullptr) {
  const Resolved found = resolve_by(hostname, "", AF_UNSPEC, SOCK_STREAM, deadline);
  if (timed_out) *timed_out = found.timed_out;
  if (found.addresses.empty()) {
    throw InvalidArgument("gloo cannot listen on " + what + ": '" + hostname + "' does not resolve (" +
                          lookup_failure(found) +
                          "); give an address of this host, or set DISTCOMM_SOCKET_IFNAME (config 'ifname') to an "
                          "interface that reaches the other ranks");
  }
  for (const distcomm_address& a : found.addresses) {
    const int fd = ::socket(a.address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw_if_limit("gloo cannot listen on " + what, errno);
    if (fd < 0) continue;
    const bool binds = ::bind(fd, reinterpret_cast<const sockaddr*>(&a.address), a.length) == 0;
    ::close(fd);
    const std::string text = binds ? numeric_text(a.address) : "";
    if (!text.empty()) return text;
  }
  throw InvalidArgument("gloo cannot listen on " + what + ": no address of '" + hostname +
                        "' is this host's; give an address of this host, or set DISTCOMM_SOCKET_IFNAME (config "
                        "'ifname') to an interface that reaches the other ranks");
}

// gloo reports a bad interface or address with its own exception types; say which setting
// was wrong and what to do instead. Making the device also opens sockets and starts gloo's
// loop thread: EAGAIN or EMFILE there is a limit of this process, said as one (an Error),
// not blamed on the address.
std::shared_ptr<::gloo::transport::Device> make_device(const ::gloo::transport::tcp::attr& attr,
                                                       const std::string& what) {
  try {
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    if (auto limit = limit_failure("gloo cannot listen on " + what, e.what())) throw Error(*limit);
    // gloo looks its address up by opening a socket per candidate and skips those it cannot
    // open, so a process out of descriptors reads "Unable to find address for: 127.0.0.1":
    // one socket opened here tells a limit (said as one) from an address.
    const int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int err = errno;
    if (probe >= 0) ::close(probe);
    if (probe < 0) throw_if_limit("gloo cannot listen on " + what + " (gloo: " + e.what() + ")", err);
    throw InvalidArgument("gloo cannot listen on " + what + ": " + e.what() +
                          "; set DISTCOMM_SOCKET_IFNAME (config 'ifname') to an interface that "
                          "reaches the other ranks");
  }
}

}  // namespace

std::string local_address_towards(const std::string& host, Clock::time_point deadline) {
  const Resolved found = resolve_by(host, "9", AF_UNSPEC, SOCK_DGRAM, deadline);
  if (found.addresses.empty()) {
    throw InvalidArgument("cannot resolve master address '" + host + "': " + lookup_failure(found));
  }
  std::string result;
  std::string last_error = "no address";
  for (const distcomm_address& a : found.addresses) {
    if (!result.empty()) break;
    const int fd = ::socket(a.address.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw_if_limit("gloo cannot find its address towards master '" + host + "'", errno);
    if (fd < 0) continue;
    // connect() on a datagram socket only looks up the route and fixes the source address.
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&a.address), a.length) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      result = numeric_text(local);
    } else {
      last_error = std::strerror(errno);
    }
    ::close(fd);
  }
  if (result.empty()) throw InvalidArgument("no route to master address '" + host + "': " + last_error);
  return result;
}

std::shared_ptr<::gloo::transport::Device> create_tcp_device(const GlooConfig& config, std::string* chosen,
                                                             Clock::time_point deadline) {
  ::gloo::transport::tcp::attr attr;
  if (const std::string& ifname = config.ifname; !ifname.empty()) {
    attr.iface = ifname;
    *chosen = "interface " + ifname + " (config 'ifname')";
    return make_device(attr, *chosen);
  }
  if (const std::string& hostname = config.hostname; !hostname.empty()) {
    *chosen = "address " + hostname + " (config 'hostname')";
    attr.hostname = listen_address_of(hostname, *chosen, deadline);
    return make_device(attr, *chosen);
  }
  if (const std::string& master = config.master_addr; !master.empty()) {
    attr.hostname = is_loopback_name(master) ? "127.0.0.1" : local_address_towards(master, deadline);
    *chosen = "address " + attr.hostname + " (the route to master " + master + ")";
    return make_device(attr, *chosen);
  }
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
    bool timed_out = false;
    try {
      attr.hostname = listen_address_of(name, std::string("host name ") + name, deadline, &timed_out);
      auto device = ::gloo::transport::tcp::CreateDevice(attr);
      *chosen = std::string("host name ") + name + " (no ifname, hostname or master_addr given)";
      return device;
    } catch (const std::exception&) {
      // The name does not resolve to an address of this host (common in containers): the
      // loopback, below. Unless the lookup took the whole deadline: then the group's
      // creation has no time left, and the error says why.
      if (timed_out) throw;
    }
  }
  attr.hostname = "127.0.0.1";
  *chosen = "127.0.0.1 (no ifname, hostname or master_addr given; this host's name does not resolve)";
  return make_device(attr, *chosen);
}

}  // namespace gloo
}  // namespace distcomm
