// A TCPStoreServer in a forked process of its own, which a test can stop (SIGSTOP: its
// connections stay open and nothing answers, as a frozen host or container) to see what
// waits on it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>

#include "api/store/tcp_store.h"

namespace distcomm {
namespace testing {

class ForkedStoreServer {
 public:
  // Forks; returns once the server listens (port()). Fails the test (gtest ASSERTs cannot
  // return from a constructor: it aborts with a message) if it cannot start.
  ForkedStoreServer();
  // SIGKILLs the server (and lets a stopped one go first).
  ~ForkedStoreServer();
  ForkedStoreServer(const ForkedStoreServer&) = delete;
  ForkedStoreServer& operator=(const ForkedStoreServer&) = delete;

  int port() const { return port_; }
  // A client of the server on 127.0.0.1 whose calls wait up to `timeout` for an answer.
  std::shared_ptr<TCPStore> client(std::chrono::milliseconds timeout) const;
  // SIGSTOP, and returns once the kernel reports it stopped (kill() returns before the stop
  // takes hold: on a busy machine the server could still answer a request sent right after).
  void stop();
  // SIGCONT: a stopped server answers again, what came while it was stopped first.
  void cont();
  // SIGKILL now: a call still waiting on it fails at once (its connection is reset).
  void kill();

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool reaped_ = false;
};

}  // namespace testing
}  // namespace distcomm
