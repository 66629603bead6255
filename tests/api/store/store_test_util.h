// What the store tests share: deadlines, forked "ranks" that report failures as text, and
// a raw client for sending what no TCPStore client would.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "api/process/job_identity.h"
#include "api/store/tcp_store.h"

namespace distcomm {
namespace testing {

using Clock = std::chrono::steady_clock;

// Generous enough for a loaded CI machine, short enough that a hang fails the test.
constexpr std::chrono::milliseconds kTestTimeout{20000};

// A fresh path in the test's temporary folder.
std::string temp_path(const std::string& tag);
bool file_exists(const std::string& path);

// How late a store's timeout may fire on a loaded machine (scheduling and a poll round,
// nothing the store waits for): a wait of T must end in [T, T + kTimeoutSlack].
constexpr std::chrono::milliseconds kTimeoutSlack{500};

// "At once", for what the server answers without waiting (a refusal, an admission past the
// pending cap), against what the client would wait otherwise (retries until its 20 s
// kTestTimeout, a 10 s handshake deadline); on a loaded machine "at once" may take a few
// seconds of scheduling.
constexpr std::chrono::milliseconds kAtOnce{5000};

// A gtest failure unless took lies in [timeout, timeout + kTimeoutSlack].
#define EXPECT_ENDED_AT_TIMEOUT(took, timeout)                                                       \
  do {                                                                                               \
    using ::std::chrono::milliseconds;                                                               \
    const int64_t took_ms = ::std::chrono::duration_cast<milliseconds>(took).count();                 \
    const int64_t timeout_ms = milliseconds(timeout).count();                                        \
    EXPECT_GE(took_ms, timeout_ms) << "ms: gave up before its timeout";                              \
    EXPECT_LE(took_ms, timeout_ms + ::distcomm::testing::kTimeoutSlack.count())                      \
        << "ms: gave up long after its timeout (slack " << ::distcomm::testing::kTimeoutSlack.count() \
        << " ms)";                                                                                   \
  } while (0)

template <typename Fn>
std::chrono::milliseconds time_of(Fn&& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

// Runs fn, which must throw an E; returns the message and how long fn took.
template <typename E, typename Fn>
std::pair<std::string, std::chrono::milliseconds> error_of(Fn&& fn) {
  std::string message = "nothing was thrown";
  const auto took = time_of([&] {
    try {
      fn();
    } catch (const E& e) {
      message = e.what();
    }
  });
  return {message, took};
}

// Forked processes that report failures as text: gtest's assertions do not cross
// fork(), so a child throws and the parent turns the message into a test failure.
class Children {
 public:
  Children(int n, const std::function<void(int)>& body);
  ~Children();
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;

  pid_t pid(int rank) const { return children_[static_cast<size_t>(rank)].first; }
  // Waits for every child; returns their failures, "" when all succeeded.
  std::string join(std::chrono::milliseconds limit = std::chrono::seconds(60));

 private:
  std::vector<std::pair<pid_t, int>> children_;
};

#define CHILD_CHECK(cond)                                                                         \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      throw std::runtime_error(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond); \
    }                                                                                             \
  } while (0)

// Options for a client of the server on 127.0.0.1:port.
TCPStoreOptions client_of(int port, std::chrono::milliseconds timeout = kTestTimeout,
                          const JobIdentity& identity = {});
// Options for a server on 127.0.0.1 (port 0: a free one).
TCPStoreOptions server_of(const JobIdentity& identity = {}, int port = 0);
// A port nothing listens on (it was free a moment ago).
int unused_port();

// A raw connection to a server on 127.0.0.1, for sending what no TCPStore client would.
class RawClient {
 public:
  explicit RawClient(int port);
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  int fd() const { return fd_; }
  // The handshake a TCPStore client would do; throws what it would throw.
  void handshake(const JobIdentity& identity = {});
  // Sends what it can without blocking; returns the bytes sent.
  size_t send_bytes(const std::string& b);
  // True when the server closes the connection within the limit (reading what it sent).
  bool closed_by_server(std::chrono::milliseconds limit = std::chrono::seconds(5));
  // True when the server closes or resets the connection within the limit, without
  // reading anything.
  bool hung_up(std::chrono::milliseconds limit = std::chrono::seconds(5));

 private:
  int fd_;
};

std::string u32(uint32_t v);
// A request as the protocol frames it: command, field count, then length-prefixed fields.
std::string request(uint8_t command, const std::vector<std::string>& fields);
constexpr uint8_t kSet = 1, kGet = 2, kAdd = 3;

}  // namespace testing
}  // namespace distcomm
