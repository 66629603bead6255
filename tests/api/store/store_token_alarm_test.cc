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
//
// That a connection caused no line is shown by a positive signal, not by a pause: a later
// stranger that must be named is, and the line (logged once) names it, not the earlier
// connection (expect_the_alarm_names_a_later_stranger). A server too slow to log fails that
// wait, where a pause of 500 ms passed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
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

// What the server reads from fd within 5 s: true when it sent bytes, false when it closed the
// connection without any, nullopt when it did neither.
std::optional<bool> answered_before_closing(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 5000) <= 0) return std::nullopt;
  char buf[internal::kMaxHandshakeBytes];
  const ssize_t r = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  if (r > 0) return true;
  if (r == 0 || errno == ECONNRESET) return false;
  return std::nullopt;
}

// How the server's lines name the far end of fd's connection: "127.0.0.1:<fd's port>".
std::string as_the_server_names(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

// Every test has a server of its own, for a job of its own.
class StoreTokenAlarm : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GT(server.port(), 0) << "the server did not start"; }

  // A stranger that knows the run id: it sends HELLO and reads the server's hello, which asks
  // for the token's proof. Returns how the server's lines name it.
  std::string greeted_stranger(RawClient& stranger) const {
    const std::string hello = hello_of(job);
    EXPECT_EQ(stranger.send_bytes(hello), hello.size());
    EXPECT_EQ(answered_before_closing(stranger.fd()), true) << "the server did not answer the stranger's HELLO";
    return as_the_server_names(stranger.fd());
  }

  // The positive signal that nothing before alarmed: a stranger that reads the server's hello
  // and leaves without a proof must be named, and the line is logged once per server, so an
  // earlier connection's line would be the one logged, naming another port. Earlier
  // connections are decided first: the server reads them, queued before the stranger
  // connected, in a round of its loop before the stranger's close (which follows a round trip).
  void expect_the_alarm_names_a_later_stranger() const {
    std::string stranger_name;
    {
      RawClient stranger(server.port());
      stranger_name = greeted_stranger(stranger);
    }
    ASSERT_TRUE(server.logs_within(kAlarm, 5s)) << "the stranger went unnamed: " << server.log();
    EXPECT_NE(server.log().find("refused a connection from " + stranger_name + ": it has this job's run id but "
                                "proved no store token"),
              std::string::npos)
        << "the line names an earlier connection, not the stranger (" << stranger_name << "): " << server.log();
  }

  const JobIdentity job = new_job_identity();
  TokenServer server{job};
};

// The user's case: the server stopped for longer than the client's connect timeout.
TEST_F(StoreTokenAlarm, AClientThatGaveUpWhileTheServerWasStoppedIsNoStranger) {
  server.stop();
  // Connected by the kernel, its HELLO sent, no answer: it gives up and closes.
  EXPECT_THROW(TCPStore(client_of(server.port(), 1000ms, job)), StoreError);
  server.cont();
  // Accepted after the stale connection, and served: the server has read that one by now.
  TCPStore client(client_of(server.port(), kTestTimeout, job));
  client.set("after", "the stop");
  EXPECT_EQ(client.get_string("after"), "the stop");
  expect_the_alarm_names_a_later_stranger();
}

// A client without the token, as a rank started without DISTCOMM_STORE_TOKEN: it reads the
// server's hello, refuses itself, and the server says so.
TEST_F(StoreTokenAlarm, AClientWithoutTheTokenIsNamed) {
  EXPECT_THROW(TCPStore(client_of(server.port(), kTestTimeout, {job.run_id, ""})), StoreRefused);
  EXPECT_TRUE(server.logs_within(kAlarm, 5s)) << server.log();
}

// A stranger that knows the run id, sends HELLO and half-closes at once (so that the
// server sees its end closed when it answers) goes unnamed, so it must learn nothing: no
// server hello, no nonce (helper-217's review: it got both and no line was logged). The
// server closes its connection: that close, awaited, is what shows no answer came first.
TEST_F(StoreTokenAlarm, AHalfClosedStrangerIsNotAnswered) {
  RawClient stranger(server.port());
  server.stop();  // both the HELLO and the FIN are there when the server reads the HELLO
  const std::string hello = hello_of(job);
  ASSERT_EQ(stranger.send_bytes(hello), hello.size());
  ASSERT_EQ(::shutdown(stranger.fd(), SHUT_WR), 0);
  std::this_thread::sleep_for(100ms);
  server.cont();
  const std::optional<bool> answered = answered_before_closing(stranger.fd());
  ASSERT_TRUE(answered.has_value()) << "the server neither answered nor closed the half-closed stranger in 5 s";
  EXPECT_FALSE(*answered) << "a half-closed stranger was sent the server's hello";
}

// A connection that closes before sending anything (a port probe, a health check) said
// nothing before and says nothing now.
TEST_F(StoreTokenAlarm, AConnectionClosedBeforeAnyByteSaysNothing) {
  { RawClient probe(server.port()); }
  expect_the_alarm_names_a_later_stranger();
}

// A client that knew the run id, read the server's hello and sent bytes that are no proof
// of the token: named as one that proved none (it was dropped without a word before).
TEST_F(StoreTokenAlarm, BytesThatAreNoProofAreNamed) {
  RawClient stranger(server.port());
  greeted_stranger(stranger);
  const std::string garbage = "\xff\xff\xff\xff not a proof";
  ASSERT_EQ(stranger.send_bytes(garbage), garbage.size());
  EXPECT_TRUE(stranger.closed_by_server());
  EXPECT_TRUE(server.logs_within(kAlarm, 5s)) << server.log();
}

// One that read the hello and closed without a proof is named, as before.
TEST_F(StoreTokenAlarm, AClientThatReadTheHelloAndLeftIsNamed) { expect_the_alarm_names_a_later_stranger(); }

}  // namespace
}  // namespace distcomm
