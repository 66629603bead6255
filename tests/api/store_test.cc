// One contract run over every Store, then what only some stores promise: atomicity across
// processes (FileStore, TCPStore), and a TCPStore server that survives hostile clients.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "api/errors.h"
#include "api/file_store.h"
#include "api/hash_store.h"
#include "api/prefix_store.h"
#include "api/tcp_store.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Bytes = Store::Bytes;

// Generous enough for a loaded CI machine, short enough that a hang fails the test.
constexpr std::chrono::milliseconds kTestTimeout = 20s;

std::string temp_path(const std::string& tag) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/store_test_" + tag + "_" +
         std::to_string(getpid()) + "_" + std::to_string(counter++);
}

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

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
  Children(int n, const std::function<void(int)>& body) {
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

  // Waits for every child; returns their failures, "" when all succeeded.
  std::string join(std::chrono::milliseconds limit = 60s) {
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
        std::this_thread::sleep_for(5ms);
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

  ~Children() {
    if (!children_.empty()) join();
  }

 private:
  std::vector<std::pair<pid_t, int>> children_;
};

#define CHILD_CHECK(cond)                                                                \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      throw std::runtime_error(std::string(__FILE__ ":") + std::to_string(__LINE__) +   \
                               ": " #cond);                                              \
    }                                                                                    \
  } while (0)

// ---------------------------------------------------------------------------------------
// The contract, over every store.

enum class Kind { kHash, kFile, kTcp, kPrefix };

std::string kind_name(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::kHash: return "HashStore";
    case Kind::kFile: return "FileStore";
    case Kind::kTcp: return "TCPStore";
    case Kind::kPrefix: return "PrefixStore";
  }
  return "unknown";
}

class StoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case Kind::kHash:
        store_ = std::make_shared<HashStore>();
        break;
      case Kind::kFile:
        path_ = temp_path("file");
        break;
      case Kind::kTcp: {
        TCPStoreOptions o;
        o.is_server = true;
        o.timeout = kTestTimeout;
        auto server = std::make_shared<TCPStore>(o);
        port_ = server->port();
        store_ = server;
        break;
      }
      case Kind::kPrefix:
        base_ = std::make_shared<HashStore>();
        break;
    }
    if (!store_) store_ = client();
    store_->set_timeout(kTestTimeout);
  }

  void TearDown() override {
    store_.reset();
    if (!path_.empty()) std::remove(path_.c_str());
  }

  // Another client of the same data: what a second rank would hold. For FileStore and
  // TCPStore it may be made in a forked child.
  StorePtr client() {
    StorePtr s;
    switch (GetParam()) {
      case Kind::kHash:
        return store_;
      case Kind::kFile:
        s = std::make_shared<FileStore>(path_);
        break;
      case Kind::kTcp: {
        TCPStoreOptions o;
        o.port = port_;
        o.timeout = kTestTimeout;
        s = std::make_shared<TCPStore>(o);
        break;
      }
      case Kind::kPrefix:
        s = std::make_shared<PrefixStore>("group0", base_);
        break;
    }
    s->set_timeout(kTestTimeout);
    return s;
  }

  StorePtr store_;
  StorePtr base_;
  std::string path_;
  int port_ = 0;
};

TEST_P(StoreTest, SetGetRoundTripsBytes) {
  const Bytes binary{0, 1, 2, 0, 255};
  store_->set("bin", binary);
  store_->set("empty", Bytes());
  store_->set("text", "hello");
  EXPECT_EQ(store_->get("bin"), binary);
  EXPECT_EQ(store_->get("empty"), Bytes());
  EXPECT_EQ(store_->get_string("text"), "hello");
  store_->set("text", "again");
  EXPECT_EQ(client()->get_string("text"), "again");
}

TEST_P(StoreTest, GetBlocksUntilAnotherClientSets) {
  std::thread setter([this] {
    auto other = client();
    std::this_thread::sleep_for(150ms);
    other->set("late", "value");
  });
  const auto took = time_of([&] { EXPECT_EQ(store_->get_string("late"), "value"); });
  setter.join();
  EXPECT_GE(took, 100ms);
}

TEST_P(StoreTest, GetTimesOutNamingTheKey) {
  store_->set_timeout(300ms);
  const auto [message, took] = error_of<Timeout>([&] { store_->get("never_set"); });
  EXPECT_NE(message.find("never_set'"), std::string::npos) << message;
  EXPECT_NE(message.find("300 ms"), std::string::npos) << message;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 1300ms);
  // The store is still usable after a timeout.
  store_->set("after", "ok");
  EXPECT_EQ(store_->get_string("after"), "ok");
}

TEST_P(StoreTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  store_->set("present_key", "x");
  const auto [message, took] =
      error_of<Timeout>([&] { store_->wait({"present_key", "absent_key"}, 250ms); });
  EXPECT_NE(message.find("absent_key'"), std::string::npos) << message;
  EXPECT_EQ(message.find("present_key"), std::string::npos) << message;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 1250ms);
}

TEST_P(StoreTest, WaitReturnsOnceEveryKeyIsSet) {
  std::thread setter([this] {
    auto other = client();
    for (const char* k : {"w1", "w2", "w3"}) {
      std::this_thread::sleep_for(30ms);
      other->set(k, "v");
    }
  });
  store_->wait({"w1", "w2", "w3"});
  setter.join();
  EXPECT_TRUE(store_->check({"w1", "w2", "w3"}));
  store_->wait({});  // nothing to wait for
}

TEST_P(StoreTest, AddKeepsDecimalText) {
  EXPECT_EQ(store_->add("counter", 5), 5);
  EXPECT_EQ(store_->add("counter", -7), -2);
  EXPECT_EQ(store_->get_string("counter"), "-2");
  store_->set("not_a_number", "12abc");
  EXPECT_THROW(store_->add("not_a_number", 1), StoreError);
  store_->set("huge", std::to_string(INT64_MAX));
  EXPECT_THROW(store_->add("huge", 1), StoreError);
  EXPECT_EQ(store_->add("counter", 0), -2);  // still usable after errors
}

TEST_P(StoreTest, CompareSet) {
  const Bytes a = to_bytes("a"), b = to_bytes("b"), c = to_bytes("c");
  // Absent key: only an empty expected value creates it.
  EXPECT_EQ(store_->compare_set("cas", a, b), Bytes());
  EXPECT_FALSE(store_->check({"cas"}));
  EXPECT_EQ(store_->compare_set("cas", Bytes(), a), a);
  // Present: swaps on a match, otherwise returns what is there and changes nothing.
  EXPECT_EQ(store_->compare_set("cas", b, c), a);
  EXPECT_EQ(store_->get("cas"), a);
  EXPECT_EQ(store_->compare_set("cas", a, c), c);
  EXPECT_EQ(client()->get("cas"), c);
}

TEST_P(StoreTest, CompareSetWakesWaiters) {
  std::thread setter([this] {
    std::this_thread::sleep_for(50ms);
    client()->compare_set("cas_wait", Bytes(), to_bytes("won"));
  });
  EXPECT_EQ(store_->get_string("cas_wait"), "won");
  setter.join();
}

TEST_P(StoreTest, CheckAndDelete) {
  EXPECT_TRUE(store_->check({}));
  EXPECT_FALSE(store_->check({"gone"}));
  store_->set("gone", "1");
  store_->set("kept", "1");
  EXPECT_TRUE(store_->check({"gone", "kept"}));
  EXPECT_TRUE(store_->delete_key("gone"));
  EXPECT_FALSE(store_->delete_key("gone"));
  EXPECT_FALSE(store_->check({"gone", "kept"}));
  EXPECT_TRUE(client()->check({"kept"}));
  EXPECT_FALSE(client()->check({"gone"}));
  store_->set("gone", "back");
  EXPECT_EQ(store_->get_string("gone"), "back");
}

TEST_P(StoreTest, NumKeys) {
  const int64_t before = store_->num_keys();
  store_->set("k1", "v");
  store_->set("k2", "v");
  store_->add("k3", 1);
  store_->set("k1", "overwritten");
  EXPECT_EQ(store_->num_keys(), before + 3);
  store_->delete_key("k2");
  EXPECT_EQ(client()->num_keys(), before + 2);
}

TEST_P(StoreTest, ConcurrentAddsFromThreads) {
  constexpr int kThreads = 4, kAdds = 200;
  std::vector<std::thread> threads;
  // Half the threads share one client, to exercise a client used from several threads.
  auto shared = client();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto s = t % 2 ? shared : client();
      for (int i = 0; i < kAdds; ++i) s->add("sum", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store_->add("sum", 0), kThreads * kAdds);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreTest,
                         ::testing::Values(Kind::kHash, Kind::kFile, Kind::kTcp, Kind::kPrefix),
                         kind_name);

// ---------------------------------------------------------------------------------------
// Across processes: what ranks of a job rely on.

using MultiProcessStoreTest = StoreTest;

TEST_P(MultiProcessStoreTest, AddsFromFourProcessesAreAtomic) {
  constexpr int kProcs = 4, kAdds = 1000;
  Children children(kProcs, [&](int) {
    auto s = client();
    for (int i = 0; i < kAdds; ++i) s->add("counter", 1);
    s->add("done", 1);
  });
  EXPECT_EQ(children.join(), "");
  EXPECT_EQ(store_->get_string("counter"), std::to_string(kProcs * kAdds));
  EXPECT_EQ(store_->get_string("done"), std::to_string(kProcs));
}

TEST_P(MultiProcessStoreTest, GetBlocksUntilAnotherProcessSets) {
  Children children(2, [&](int rank) {
    auto s = client();
    if (rank == 0) {
      std::this_thread::sleep_for(200ms);
      s->set("from_rank0", "hello");
      CHILD_CHECK(s->get_string("from_rank1") == "world");
    } else {
      CHILD_CHECK(s->get_string("from_rank0") == "hello");
      s->set("from_rank1", "world");
    }
  });
  EXPECT_EQ(children.join(), "");
}

TEST_P(MultiProcessStoreTest, CompareSetElectsOneLeader) {
  constexpr int kProcs = 4;
  Children children(kProcs, [&](int rank) {
    auto s = client();
    const Bytes mine = to_bytes(std::to_string(rank));
    if (s->compare_set("leader", Bytes(), mine) == mine) s->add("leaders", 1);
  });
  EXPECT_EQ(children.join(), "");
  EXPECT_EQ(store_->get_string("leaders"), "1");
}

TEST_P(MultiProcessStoreTest, WaitTimesOutInAChildWithoutHanging) {
  Children children(1, [&](int) {
    auto s = client();
    const auto start = Clock::now();
    try {
      s->wait({"nobody_sets_this"}, 300ms);
      CHILD_CHECK(!"wait returned");
    } catch (const Timeout& e) {
      CHILD_CHECK(std::string(e.what()).find("nobody_sets_this") != std::string::npos);
    }
    CHILD_CHECK(Clock::now() - start < 1300ms);
  });
  EXPECT_EQ(children.join(5s), "");
}

INSTANTIATE_TEST_SUITE_P(SharedStores, MultiProcessStoreTest,
                         ::testing::Values(Kind::kFile, Kind::kTcp), kind_name);

// ---------------------------------------------------------------------------------------
// PrefixStore

TEST(PrefixStoreTest, PrefixesAreSeparateNamespaces) {
  auto base = std::make_shared<HashStore>();
  PrefixStore a("a", base), b("b", base);
  a.set("k", "from a");
  b.set("k", "from b");
  EXPECT_EQ(a.get_string("k"), "from a");
  EXPECT_EQ(b.get_string("k"), "from b");
  EXPECT_EQ(base->get_string("a/k"), "from a");
  EXPECT_FALSE(a.check({"only_in_b"}));
  b.set("only_in_b", "x");
  EXPECT_FALSE(a.check({"only_in_b"}));
  // num_keys counts the base store, every prefix included.
  EXPECT_EQ(a.num_keys(), 3);
}

TEST(PrefixStoreTest, UsesItsOwnTimeout) {
  auto base = std::make_shared<HashStore>();
  base->set_timeout(kTestTimeout);
  PrefixStore p("p", base);
  p.set_timeout(100ms);
  const auto [message, took] = error_of<Timeout>([&] { p.get("missing"); });
  EXPECT_NE(message.find("'p/missing'"), std::string::npos) << message;
  EXPECT_LT(took, 1100ms);
  EXPECT_THROW(PrefixStore("p", nullptr), InvalidArgument);
}

// ---------------------------------------------------------------------------------------
// FileStore

TEST(FileStoreTest, ProcessesCreatingTheFileTogetherShareIt) {
  const std::string path = temp_path("create");
  ASSERT_FALSE(file_exists(path));
  constexpr int kProcs = 8;
  Children children(kProcs, [&](int) {
    FileStore s(path);
    s.set_timeout(kTestTimeout);
    s.add("joined", 1);
    s.wait({"go"});
  });
  FileStore s(path);
  s.set_timeout(kTestTimeout);
  while (s.add("joined", 0) < kProcs) std::this_thread::sleep_for(10ms);
  s.set("go", "");
  EXPECT_EQ(children.join(), "");
  std::remove(path.c_str());
}

TEST(FileStoreTest, LastOfNumWorkersDeletesTheFile) {
  const std::string path = temp_path("cleanup");
  {
    FileStore a(path, 2);
    {
      FileStore b(path, 2);
      b.set("k", "v");
    }
    EXPECT_TRUE(file_exists(path));
    EXPECT_EQ(a.get_string("k"), "v");
    EXPECT_EQ(a.num_keys(), 1);  // the count of finished workers is not a key
  }
  EXPECT_FALSE(file_exists(path));
}

TEST(FileStoreTest, ATornLastRecordIsCutOffByTheNextWriter) {
  const std::string path = temp_path("torn");
  FileStore a(path);
  a.set("before", "1");
  {
    // What a writer that died mid-append leaves: the start of a SET record.
    std::ofstream f(path, std::ios::binary | std::ios::app);
    const char partial[] = {1, 2, 0, 0, 0, 3, 0, 0, 0, 'a'};
    f.write(partial, sizeof(partial));
  }
  FileStore b(path);
  b.set_timeout(kTestTimeout);
  EXPECT_EQ(b.get_string("before"), "1");
  b.set("after", "2");
  EXPECT_EQ(a.get_string("after"), "2");
  EXPECT_EQ(FileStore(path).num_keys(), 2);
  std::remove(path.c_str());
}

TEST(FileStoreTest, ACorruptFileIsAStoreError) {
  const std::string path = temp_path("corrupt");
  {
    std::ofstream f(path, std::ios::binary);
    const unsigned char bad[] = {9, 0xff, 0xff, 0xff, 0xff};  // 4 billion fields
    f.write(reinterpret_cast<const char*>(bad), sizeof(bad));
  }
  FileStore s(path);
  EXPECT_THROW(s.num_keys(), StoreError);
  std::remove(path.c_str());
  EXPECT_THROW(FileStore("/nonexistent_dir/store"), StoreError);
}

// ---------------------------------------------------------------------------------------
// TCPStore

TCPStoreOptions client_of(int port, std::chrono::milliseconds timeout = kTestTimeout) {
  TCPStoreOptions o;
  o.port = port;
  o.timeout = timeout;
  return o;
}

// A port nothing listens on (it was free a moment ago).
int unused_port() {
  TCPStoreServer probe("127.0.0.1", 0);
  probe.start();
  return probe.port();
}

TEST(TCPStoreTest, ServerPicksAPortAndAStandaloneServerServesClients) {
  TCPStoreServer server;
  server.start();
  ASSERT_GT(server.port(), 0);
  EXPECT_TRUE(server.running());
  TCPStore a(client_of(server.port())), b(client_of(server.port()));
  a.set("k", "v");
  EXPECT_EQ(b.get_string("k"), "v");
  EXPECT_EQ(a.port(), server.port());
  EXPECT_THROW(server.start(), StoreError);
  // Over the server's limits: refused before sending, and the connection stays usable.
  EXPECT_THROW(a.set(std::string(70000, 'k'), "v"), InvalidArgument);
  EXPECT_EQ(a.get_string("k"), "v");
}

TEST(TCPStoreTest, ConnectFailureNamesTheAddressAndTheOsError) {
  const int port = unused_port();
  const auto [message, took] = error_of<StoreError>([&] { TCPStore s(client_of(port, 300ms)); });
  EXPECT_NE(message.find("cannot connect to 127.0.0.1:" + std::to_string(port) + " after 300 ms"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("Connection refused"), std::string::npos) << message;
  EXPECT_LT(took, 2s);
  EXPECT_THROW(TCPStore(client_of(0)), InvalidArgument);
}

TEST(TCPStoreTest, ClientRetriesUntilTheServerStarts) {
  const int port = unused_port();
  TCPStoreServer server("", port);
  std::thread late([&] {
    std::this_thread::sleep_for(300ms);
    server.start();
  });
  TCPStore s(client_of(port));
  late.join();
  s.set("k", "v");
  EXPECT_EQ(s.get_string("k"), "v");
}

TEST(TCPStoreTest, ServerGoneIsAStoreErrorNotAHang) {
  TCPStoreServer server;
  server.start();
  TCPStore s(client_of(server.port()));
  s.set("k", "v");
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    server.stop();
  });
  // A get parked on the server when it stops.
  const auto [message, took] = error_of<StoreError>([&] { s.get("never"); });
  EXPECT_NE(message.find("closed the connection"), std::string::npos) << message;
  stopper.join();
  // Reconnecting to a server that is gone fails quickly.
  EXPECT_LT(time_of([&] { EXPECT_THROW(s.set("k", "v"), StoreError); }), 3s);
}

TEST(TCPStoreTest, LargeValuesRoundTrip) {
  TCPStore server([] {
    TCPStoreOptions o;
    o.is_server = true;
    o.timeout = kTestTimeout;
    return o;
  }());
  TCPStore c(client_of(server.port()));
  Bytes big(24 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 7);
  c.set("big", big);
  EXPECT_EQ(server.get("big"), big);
  EXPECT_EQ(c.compare_set("big", big, Bytes{1}), Bytes{1});
}

TEST(TCPStoreTest, WaitForWorkers) {
  const int port = unused_port();
  TCPStoreOptions o;
  o.port = port;
  o.is_server = true;
  o.num_workers = 3;
  o.wait_for_workers = true;
  o.timeout = kTestTimeout;
  std::thread workers([&] {
    std::this_thread::sleep_for(100ms);
    TCPStoreOptions w = client_of(port);
    w.num_workers = 3;
    TCPStore a(w), b(w);
    a.wait({"server_ready"});
  });
  TCPStore server(o);  // returns once both workers counted themselves in
  EXPECT_EQ(server.add("init/", 0), 3);
  server.set("server_ready", "");
  workers.join();

  o.port = 0;
  o.num_workers = 2;
  o.timeout = 300ms;
  const auto [message, took] = error_of<Timeout>([&] { TCPStore alone(o); });
  EXPECT_NE(message.find("only 1 of 2 workers"), std::string::npos) << message;
  EXPECT_LT(took, 1300ms);
}

// A raw connection to the server, for sending what no TCPStore client would.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      throw std::runtime_error("raw connect failed");
    }
  }
  ~RawClient() { close(fd_); }

  void send_bytes(const std::string& b) {
    [[maybe_unused]] ssize_t r = send(fd_, b.data(), b.size(), MSG_NOSIGNAL);
  }

  // True when the server closes the connection within the limit.
  bool closed_by_server(std::chrono::milliseconds limit = 5s) {
    const auto deadline = Clock::now() + limit;
    char buf[256];
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t r = recv(fd_, buf, sizeof(buf), 0);
      if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
    }
    return false;
  }

 private:
  int fd_;
};

std::string u32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

// A request as the protocol frames it: command, field count, then length-prefixed fields.
std::string request(uint8_t command, const std::vector<std::string>& fields) {
  std::string m(1, static_cast<char>(command));
  m += u32(static_cast<uint32_t>(fields.size()));
  for (const auto& f : fields) m += u32(static_cast<uint32_t>(f.size())) + f;
  return m;
}

constexpr uint8_t kSet = 1, kGet = 2, kAdd = 3;

TEST(TCPStoreTest, HostileClientsAreDisconnectedWhileOthersAreServed) {
  TCPStoreServer server;
  server.start();
  const int port = server.port();
  // Well-behaved ranks keep adding in other processes until the hostile clients are done.
  constexpr int kProcs = 3;
  Children ranks(kProcs, [&](int rank) {
    TCPStore s(client_of(port));
    s.add("started", 1);
    int64_t mine = 0;
    while (!s.check({"hostile_done"})) {
      s.add("counter", 1);
      ++mine;
    }
    s.set("count" + std::to_string(rank), std::to_string(mine));
  });
  TCPStore check(client_of(port));
  while (check.add("started", 0) < kProcs) std::this_thread::sleep_for(5ms);

  const std::vector<std::pair<std::string, std::string>> hostile = {
      {"unknown command", std::string(1, '\0') + "xyz"},
      {"command 255", std::string(1, '\xff')},
      {"4 GiB field", std::string(1, kSet) + u32(2) + u32(0xffffffffu)},
      {"over 256 MiB field", std::string(1, kSet) + u32(2) + u32((256u << 20) + 1)},
      {"4 billion fields", std::string(1, kGet) + u32(0xffffffffu)},
      {"key over 64 KiB", request(kSet, {std::string(70000, 'k'), "v"})},
      {"GET with two fields", request(kGet, {"a", "b"})},
      {"ADD with a 3-byte delta", request(kAdd, {"counter", "abc"})},
  };
  for (const auto& [what, bytes] : hostile) {
    RawClient raw(port);
    raw.send_bytes(bytes);
    EXPECT_TRUE(raw.closed_by_server()) << what;
  }

  // Random bytes and truncated messages, closed by the client before they complete.
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {
    RawClient raw(port);
    std::string junk(1 + rng() % 300, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    if (i % 2) junk = request(kSet, {"key", std::string(1000, 'v')}).substr(0, rng() % 1000);
    raw.send_bytes(junk);
  }
  // A client that stalls mid-message holds only its own connection.
  RawClient stalled(port);
  stalled.send_bytes(request(kSet, {"stalled", "value"}).substr(0, 7));

  check.set("hostile_done", "");
  EXPECT_EQ(ranks.join(), "");
  int64_t total = 0;
  for (int r = 0; r < kProcs; ++r) {
    total += std::stoll(check.get_string("count" + std::to_string(r)));
  }
  EXPECT_GT(total, 0);
  EXPECT_EQ(check.add("counter", 0), total);
  EXPECT_FALSE(check.check({"stalled"}));
}

TEST(TCPStoreTest, AClientThatTimedOutDoesNotDisturbOtherWaiters) {
  TCPStoreServer server;
  server.start();
  TCPStore impatient(client_of(server.port())), patient(client_of(server.port()));
  std::thread waiter([&] { EXPECT_EQ(patient.get_string("slow"), "finally"); });
  impatient.set_timeout(100ms);
  EXPECT_THROW(impatient.get("slow"), Timeout);
  TCPStore(client_of(server.port())).set("slow", "finally");
  waiter.join();
  // The timed-out client reconnects and sees the value.
  EXPECT_EQ(impatient.get_string("slow"), "finally");
}

}  // namespace
}  // namespace distcomm
