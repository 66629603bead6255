// The store's "proved no store token" line names a client that knew the job's run id but
// could not prove its token (one started without DISTCOMM_STORE_TOKEN): it read the
// server's hello and left, or answered it with something that is no proof. A client of the
// job that gave up its connect while the server was stopped is none of those: its
// connection waited in the listen queue with its HELLO and its close, and it never saw the
// server's hello. The server used to take it for such a stranger once resumed -- a false
// alarm in a launcher's log after the launcher had been stopped (SIGSTOP) for 20 s.
//
// Each test runs a real TCPStoreServer with a token in a forked process of its own (which
// can be stopped, and whose stderr is a file), as a launcher serves the job's store.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/internal/store_handshake.h"
#include "api/store/server/tcp_store_server.h"
#include "api/store/tcp_store.h"
#include "tests/api/store/store_test_util.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using namespace testing;

constexpr char kAlarm[] = "proved no store token";

class TokenServer {
 public:
  explicit TokenServer(const JobIdentity& job) : log_(temp_path("token_server_log")) {
    int port_pipe[2];
    if (::pipe(port_pipe) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      const int file = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (file < 0 || ::dup2(file, STDERR_FILENO) < 0) ::_exit(1);
      TCPStoreServerOptions o;
      o.bind_address = "127.0.0.1";
      o.identity = job;
      TCPStoreServer server(o);
      server.start();
      const int port = server.port();
      if (::write(port_pipe[1], &port, sizeof(port)) != sizeof(port)) ::_exit(1);
      ::pause();
      ::_exit(0);
    }
    ::close(port_pipe[1]);
    if (::read(port_pipe[0], &port_, sizeof(port_)) != static_cast<ssize_t>(sizeof(port_))) port_ = -1;
    ::close(port_pipe[0]);
  }
  ~TokenServer() {
    ::kill(pid_, SIGKILL);
    ::kill(pid_, SIGCONT);
    ::waitpid(pid_, nullptr, 0);
    ::unlink(log_.c_str());
  }
  TokenServer(const TokenServer&) = delete;
  TokenServer& operator=(const TokenServer&) = delete;

  int port() const { return port_; }
  // Returns once the kernel says it is stopped.
  void stop() {
    ::kill(pid_, SIGSTOP);
    int status = 0;
    ::waitpid(pid_, &status, WUNTRACED);
  }
  void cont() { ::kill(pid_, SIGCONT); }
  // What it logged so far.
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // Whether its log says `text` within `limit` (the server's thread logs as it gets to it).
  bool logs_within(const std::string& text, std::chrono::milliseconds limit) const {
    const auto until = Clock::now() + limit;
    while (log().find(text) == std::string::npos) {
      if (Clock::now() >= until) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }

 private:
  const std::string log_;
  pid_t pid_ = -1;
  int port_ = -1;
};

std::string hello_of(const JobIdentity& job) {
  const Store::Bytes hello =
      internal::encode_client_hello({job.run_id, std::string(internal::kNonceBytes, 'n'), -1});
  return std::string(hello.begin(), hello.end());
}

// Reads what the server answered, within 5 s: true when it answered anything.
bool answered(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 5000) <= 0) return false;
  char buf[internal::kMaxHandshakeBytes];
  return ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0;
}

// A client without the token, as a rank started without DISTCOMM_STORE_TOKEN: it reads the
// server's hello, refuses itself, and the server says so.
void expect_a_client_without_the_token_is_named(const TokenServer& server, const JobIdentity& job) {
  EXPECT_THROW(TCPStore(client_of(server.port(), kTestTimeout, {job.run_id, ""})), StoreRefused);
  EXPECT_TRUE(server.logs_within(kAlarm, 5s)) << server.log();
}

// The user's case: the server stopped for longer than the client's connect timeout.
TEST(StoreTokenAlarm, AClientThatGaveUpWhileTheServerWasStoppedIsNoStranger) {
  const JobIdentity job = new_job_identity();
  TokenServer server(job);
  ASSERT_GT(server.port(), 0);
  server.stop();
  // Connected by the kernel, its HELLO sent, no answer: it gives up and closes.
  EXPECT_THROW(TCPStore(client_of(server.port(), 1000ms, job)), StoreError);
  server.cont();
  // Accepted after the stale connection, and served: the server has read that one by now.
  TCPStore client(client_of(server.port(), kTestTimeout, job));
  client.set("after", "the stop");
  EXPECT_EQ(client.get_string("after"), "the stop");
  std::this_thread::sleep_for(500ms);  // room for a line the stale connection's close would cause
  EXPECT_EQ(server.log().find(kAlarm), std::string::npos) << server.log();
  // The line still names a client that has no token (first of its kind: it is logged).
  expect_a_client_without_the_token_is_named(server, job);
}

// A stranger that knows the run id, sends HELLO and half-closes at once (so that the
// server sees its end closed when it answers) goes unnamed, so it must learn nothing: no
// server hello, no nonce (helper-217's review: it got both and no line was logged).
TEST(StoreTokenAlarm, AHalfClosedStrangerIsNotAnswered) {
  const JobIdentity job = new_job_identity();
  TokenServer server(job);
  ASSERT_GT(server.port(), 0);
  RawClient stranger(server.port());
  server.stop();  // both the HELLO and the FIN are there when the server reads the HELLO
  const std::string hello = hello_of(job);
  ASSERT_EQ(stranger.send_bytes(hello), hello.size());
  ASSERT_EQ(::shutdown(stranger.fd(), SHUT_WR), 0);
  std::this_thread::sleep_for(100ms);
  server.cont();
  EXPECT_FALSE(answered(stranger.fd())) << "a half-closed stranger was sent the server's hello";
}

// A connection that closes before sending anything (a port probe, a health check) said
// nothing before and says nothing now.
TEST(StoreTokenAlarm, AConnectionClosedBeforeAnyByteSaysNothing) {
  const JobIdentity job = new_job_identity();
  TokenServer server(job);
  ASSERT_GT(server.port(), 0);
  { RawClient probe(server.port()); }
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(server.log().find(kAlarm), std::string::npos) << server.log();
  expect_a_client_without_the_token_is_named(server, job);
}

// A client that knew the run id, read the server's hello and sent bytes that are no proof
// of the token: named as one that proved none (it was dropped without a word before).
TEST(StoreTokenAlarm, BytesThatAreNoProofAreNamed) {
  const JobIdentity job = new_job_identity();
  TokenServer server(job);
  ASSERT_GT(server.port(), 0);
  RawClient stranger(server.port());
  const std::string hello = hello_of(job);
  ASSERT_EQ(stranger.send_bytes(hello), hello.size());
  ASSERT_TRUE(answered(stranger.fd()));
  const std::string garbage = "\xff\xff\xff\xff not a proof";
  ASSERT_EQ(stranger.send_bytes(garbage), garbage.size());
  EXPECT_TRUE(stranger.closed_by_server());
  EXPECT_TRUE(server.logs_within(kAlarm, 5s)) << server.log();
}

// One that read the hello and closed without a proof is named, as before.
TEST(StoreTokenAlarm, AClientThatReadTheHelloAndLeftIsNamed) {
  const JobIdentity job = new_job_identity();
  TokenServer server(job);
  ASSERT_GT(server.port(), 0);
  {
    RawClient stranger(server.port());
    const std::string hello = hello_of(job);
    ASSERT_EQ(stranger.send_bytes(hello), hello.size());
    ASSERT_TRUE(answered(stranger.fd()));
  }
  EXPECT_TRUE(server.logs_within(kAlarm, 5s)) << server.log();
}

}  // namespace
}  // namespace distcomm
