#include "tests/api/store/store_test_util.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "api/store/internal/store_handshake.h"

namespace distcomm {
namespace testing {

std::string temp_path(const std::string& tag) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/store_test_" + tag + "_" + std::to_string(getpid()) + "_" +
         std::to_string(counter++);
}

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

Children::Children(int n, const std::function<void(int)>& body) {
  for (int rank = 0; rank < n; ++rank) {
    int p[2];
    if (pipe(p) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      int code = 0;
      std::string message;
      try {
        body(rank);
      } catch (const std::exception& e) {
        message = e.what();
        code = 1;
      }
      [[maybe_unused]] ssize_t w = write(p[1], message.data(), message.size());
      // _exit: the parent's gtest state and static destructors are not the child's.
      _exit(code);
    }
    close(p[1]);
    children_.push_back({pid, p[0]});
  }
}

Children::~Children() {
  if (!children_.empty()) join();
}

std::string Children::join(std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::string failures;
  for (size_t rank = 0; rank < children_.size(); ++rank) {
    const auto [pid, fd] = children_[rank];
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        failures += "rank " + std::to_string(rank) + " hung; ";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string message;
    char buf[512];
    ssize_t r;
    while ((r = read(fd, buf, sizeof(buf))) > 0) message.append(buf, static_cast<size_t>(r));
    close(fd);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures += "rank " + std::to_string(rank) + " failed: " +
                  (message.empty() ? "status " + std::to_string(status) : message) + "; ";
    }
  }
  children_.clear();
  return failures;
}

TCPStoreOptions client_of(int port, std::chrono::milliseconds timeout, const JobIdentity& identity) {
  TCPStoreOptions o;
  o.port = port;
  o.timeout = timeout;
  o.identity = identity;
  return o;
}

TCPStoreOptions server_of(const JobIdentity& identity, int port) {
  TCPStoreOptions o = client_of(port, kTestTimeout, identity);
  o.is_server = true;
  return o;
}

int unused_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  if (!ok) throw std::runtime_error("cannot find a free port");
  return ntohs(a.sin_port);
}

RawClient::RawClient(int port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd_);
    throw std::runtime_error("raw connect failed");
  }
}

RawClient::~RawClient() { close(fd_); }

void RawClient::handshake(const JobIdentity& identity) {
  bool closed_early = false;
  internal::client_handshake(fd_, "raw", identity, Clock::now() + kTestTimeout, &closed_early);
  if (closed_early) throw std::runtime_error("the server closed the raw connection during the handshake");
}

size_t RawClient::send_bytes(const std::string& b) {
  const ssize_t r = send(fd_, b.data(), b.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return r > 0 ? static_cast<size_t>(r) : 0;
}

bool RawClient::closed_by_server(std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  char buf[256];
  while (Clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    const ssize_t r = recv(fd_, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

bool RawClient::hung_up(std::chrono::milliseconds limit) {
  pollfd p{fd_, POLLRDHUP, 0};
  const int n = poll(&p, 1, static_cast<int>(limit.count()));
  return n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

std::string u32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

std::string request(uint8_t command, const std::vector<std::string>& fields) {
  std::string m(1, static_cast<char>(command));
  m += u32(static_cast<uint32_t>(fields.size()));
  for (const auto& f : fields) m += u32(static_cast<uint32_t>(f.size())) + f;
  return m;
}

}  // namespace testing
}  // namespace distcomm
