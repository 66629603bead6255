#include "launch/elastic_options.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "api/store/internal/name_lookup.h"

namespace distcomm {
namespace launch {
namespace {

[[noreturn]] void reject(const std::string& flag, const std::string& value, const std::string& why) {
  throw std::invalid_argument("--" + flag + "=" + value + ": " + why);
}

bool parse_int(const std::string& text, int* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) return false;
  *out = std::atoi(text.c_str());
  return true;
}

std::string seconds(std::chrono::milliseconds ms) { return std::to_string(ms.count() / 1000.0); }

}  // namespace

std::pair<int, int> parse_nnodes(const std::string& text) {
  const size_t colon = text.find(':');
  int min = 0, max = 0;
  const bool ok = colon == std::string::npos
                      ? parse_int(text, &min) && parse_int(text, &max)
                      : parse_int(text.substr(0, colon), &min) && parse_int(text.substr(colon + 1), &max);
  if (!ok) reject("nnodes", text, "expected a number of machines (4) or a range MIN:MAX (1:4)");
  if (min < 1) reject("nnodes", text, "at least 1 machine");
  if (max < min) reject("nnodes", text, "MAX (" + std::to_string(max) + ") is below MIN (" + std::to_string(min) + ")");
  return {min, max};
}

void parse_endpoint(const std::string& text, ElasticOptions* o) {
  std::string host = text, port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) reject("rdzv_endpoint", text, "an IPv6 address needs its closing ']'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') reject("rdzv_endpoint", text, "expected HOST:PORT");
      port = text.substr(close + 2);
    }
  } else if (text.find(':') != text.rfind(':')) {
    reject("rdzv_endpoint", text, "write an IPv6 address in brackets: [ADDR]:PORT");
  } else if (const size_t colon = text.find(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) reject("rdzv_endpoint", text, "expected HOST:PORT, e.g. node0.example.com:29400");
  o->endpoint_host = host;
  o->endpoint_port = kDefaultRendezvousPort;
  if (!port.empty() && (!parse_int(port, &o->endpoint_port) || o->endpoint_port < 1 || o->endpoint_port > 65535)) {
    reject("rdzv_endpoint", text, "the port must be in [1, 65535]");
  }
}

void validate(const ElasticOptions& o) {
  const std::string range = std::to_string(o.min_nodes) + ":" + std::to_string(o.max_nodes);
  if (o.min_nodes < 1 || o.max_nodes < o.min_nodes) reject("nnodes", range, "expected 1 <= MIN <= MAX");
  if (o.endpoint_host.empty()) reject("rdzv_endpoint", "", "an elastic job needs the rendezvous endpoint, HOST:PORT");
  if (o.timeout.count() <= 0) reject("rdzv_timeout_s", seconds(o.timeout), "must be > 0");
  // By the rendezvous' own deadline: a DNS server that does not answer would otherwise
  // hold the launcher for the resolver's timeouts (name_lookup.h), past --rdzv_timeout_s.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  const internal::NameLookup found =
      internal::look_up(o.endpoint_host, std::to_string(o.endpoint_port), hints, std::chrono::steady_clock::now() + o.timeout);
  if (!found.found) {
    reject("rdzv_endpoint", o.endpoint_host + ":" + std::to_string(o.endpoint_port),
           "cannot resolve '" + o.endpoint_host + "': " + found.error +
               (found.timed_out ? " (--rdzv_timeout_s)" : ""));
  }
  if (o.rdzv_id.empty() || o.rdzv_id.size() > 128 ||
      o.rdzv_id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
          std::string::npos) {
    reject("rdzv_id", o.rdzv_id, "expected 1 to 128 letters, digits, '_', '-' or '.'");
  }
  if (o.last_call.count() < 0) reject("rdzv_last_call_s", seconds(o.last_call), "must be >= 0");
}

std::string local_address_towards(const std::string& host, int port, std::chrono::milliseconds wait) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  const internal::NameLookup found =
      internal::look_up(host, std::to_string(port), hints, std::chrono::steady_clock::now() + wait);
  if (!found.found) throw std::runtime_error("cannot resolve '" + host + "': " + found.error);
  std::string address;
  for (const addrinfo* a = found.found.get(); a != nullptr && address.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char text[INET6_ADDRSTRLEN] = {0};
      const void* where = local.ss_family == AF_INET6
                              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (::inet_ntop(local.ss_family, where, text, sizeof(text)) != nullptr) address = text;
    }
    ::close(fd);
  }
  if (address.empty()) throw std::runtime_error("no route from this host to '" + host + "'");
  return address;
}

}  // namespace launch
}  // namespace distcomm
