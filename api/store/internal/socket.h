// The few POSIX socket operations TCPStore needs, with deadlines instead of blocking
// forever, and errno turned into messages that say what was attempted.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace distcomm {
namespace internal {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor, which a forked child lets go of (close_on_fork.h).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) { reset(fd); }
  ~Socket() { reset(); }
  Socket(Socket&& o) noexcept { reset(o.release()); }
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // The descriptor, no longer owned (nor let go of by a forked child).
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

std::string errno_message(int err);
std::string host_port(const std::string& host, int port);

// Listens on host:port; an empty host means every interface (IPv6 and IPv4 where the
// machine has both). A name is resolved, and its first address that is not loopback is
// preferred. Port 0 picks a free port: see local_port(). The socket is non-blocking.
// Throws StoreError naming the address and the OS error (and, for a port in use, that
// another job may hold it). `named_by`: what chose host when not MASTER_ADDR
// ("DISTCOMM_STORE_BIND"), for the error about an address that is not this host's.
Socket listen_tcp(const std::string& host, int port, const std::string& named_by = "");
int local_port(int fd);
// "10.0.0.5:41234" for the other end of a connected socket, "?" when unknown.
std::string peer_name(int fd);
// Whether a socket is bound to a loopback address (127.0.0.0/8, ::1).
bool bound_to_loopback(int fd);
// Whether host is a numeric IPv4 or IPv6 address rather than a name.
bool is_numeric_address(const std::string& host);

// Connects to host:port, retrying refused and unreachable attempts, and names that do not
// resolve (yet), with backoff until `timeout` has passed, since the server may start (and
// its name appear in DNS) after its clients. Throws StoreError "<who>: cannot connect to
// host:port after T: <what the last attempt met>" (for a name its DNS says does not exist,
// "'host' is not a known host name: <getaddrinfo's words>", name_lookup.h). With
// name_unknown: set to whether the last lookup answered that the name does not exist.
Socket connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout,
                   const std::string& who = "TCPStore", bool* name_unknown = nullptr);

void set_nonblocking(int fd);
void set_nodelay(int fd);

enum class IoStatus { kOk, kTimeout, kClosed, kError };

// Move exactly n bytes on a blocking socket, waiting at most until deadline. kError
// leaves errno set. Sends never raise SIGPIPE.
IoStatus send_all(int fd, const void* data, size_t n, Clock::time_point deadline);
IoStatus recv_all(int fd, void* data, size_t n, Clock::time_point deadline);

}  // namespace internal
}  // namespace distcomm
