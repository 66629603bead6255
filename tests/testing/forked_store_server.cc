#include "tests/testing/forked_store_server.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "api/store/server/tcp_store_server.h"

namespace distcomm {
namespace testing {

std::shared_ptr<TCPStore> ForkedStoreServer::client(std::chrono::milliseconds timeout) const {
  TCPStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port_;
  o.timeout = timeout;
  return std::make_shared<TCPStore>(o);
}

ForkedStoreServer::ForkedStoreServer() {
  int port_pipe[2];
  if (::pipe(port_pipe) != 0) {
    std::perror("ForkedStoreServer: pipe");
    std::abort();
  }
  pid_ = ::fork();
  if (pid_ < 0) {
    std::perror("ForkedStoreServer: fork");
    std::abort();
  }
  if (pid_ == 0) {
    TCPStoreServer server;
    server.start();
    const int port = server.port();
    if (::write(port_pipe[1], &port, sizeof(port)) != sizeof(port)) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  ::close(port_pipe[1]);
  if (::read(port_pipe[0], &port_, sizeof(port_)) != static_cast<ssize_t>(sizeof(port_))) {
    std::fprintf(stderr, "ForkedStoreServer: the server never said its port\n");
    std::abort();
  }
  ::close(port_pipe[0]);
}

ForkedStoreServer::~ForkedStoreServer() { kill(); }

void ForkedStoreServer::stop() {
  if (::kill(pid_, SIGSTOP) != 0) return;
  int status = 0;
  ::waitpid(pid_, &status, WUNTRACED);
}

void ForkedStoreServer::cont() {
  if (reaped_) return;
  ::kill(pid_, SIGCONT);
}

void ForkedStoreServer::kill() {
  if (reaped_) return;
  ::kill(pid_, SIGKILL);
  ::kill(pid_, SIGCONT);
  ::waitpid(pid_, nullptr, 0);
  reaped_ = true;
}

}  // namespace testing
}  // namespace distcomm
