// One contract run over every Store, then what only some stores promise: atomicity across
// processes (FileStore, TCPStore), PrefixStore's namespaces and FileStore's file. The
// TCPStore's own tests are in tcp_store_test.cc and tcp_store_*_test.cc.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

#include "api/errors.h"
#include "api/store/file_store.h"
#include "api/store/hash_store.h"
#include "api/store/internal/call_deadline.h"
#include "api/store/prefix_store.h"
#include "api/store/tcp_store.h"
#include "tests/api/store/store_test_util.h"

namespace distcomm {
namespace {

using namespace std::chrono_literals;
using namespace testing;
using Bytes = Store::Bytes;

// ---------------------------------------------------------------------------------------
// The contract, over every store.

// TCPStore runs the contract with a token (as a launched job does) and without (by hand).
enum class Kind { kHash, kFile, kTcp, kTcpWithoutToken, kPrefix };

std::string kind_name(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::kHash: return "HashStore";
    case Kind::kFile: return "FileStore";
    case Kind::kTcp: return "TCPStore";
    case Kind::kTcpWithoutToken: return "TCPStoreWithoutToken";
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
      case Kind::kTcp:
      case Kind::kTcpWithoutToken: {
        if (GetParam() == Kind::kTcp) identity_ = new_job_identity();
        auto server = std::make_shared<TCPStore>(server_of(identity_));
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
      case Kind::kTcp:
      case Kind::kTcpWithoutToken:
        s = std::make_shared<TCPStore>(client_of(port_, kTestTimeout, identity_));
        break;
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
  JobIdentity identity_;
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
  Clock::time_point set_at;
  std::thread setter([&] {
    auto other = client();
    std::this_thread::sleep_for(150ms);  // most likely the get is waiting by now; nothing depends on it
    set_at = Clock::now();
    other->set("late", "value");
  });
  EXPECT_EQ(store_->get_string("late"), "value");
  const auto got_at = Clock::now();
  setter.join();
  EXPECT_GE(got_at, set_at) << "get returned before the key was set";
}

TEST_P(StoreTest, GetTimesOutNamingTheKey) {
  store_->set_timeout(300ms);
  const auto [message, took] = error_of<Timeout>([&] { store_->get("never_set"); });
  EXPECT_NE(message.find("never_set'"), std::string::npos) << message;
  EXPECT_NE(message.find("300 ms"), std::string::npos) << message;
  EXPECT_ENDED_AT_TIMEOUT(took, 300ms);
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
  EXPECT_NE(message.find("250 ms"), std::string::npos) << message;
  EXPECT_ENDED_AT_TIMEOUT(took, 250ms);
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

TEST_P(StoreTest, ReadPresentGivesEachKeysValueOrNothingWithoutWaiting) {
  const Bytes binary{0, 1, 2, 0, 255};
  store_->set("bin", binary);
  store_->set("empty", Bytes());  // present, and empty: not the same as absent
  client()->set("other's", "from another client");
  EXPECT_TRUE(read_present(*store_, {}).empty());
  std::vector<std::optional<Bytes>> values;
  // The store's timeout is kTestTimeout: a read that waited for "absent" would take it.
  const auto took = time_of([&] { values = read_present(*store_, {"bin", "absent", "empty", "other's", "bin"}); });
  EXPECT_LT(took, 2s);
  ASSERT_EQ(values.size(), 5u);
  EXPECT_EQ(values[0], binary);
  EXPECT_EQ(values[1], std::nullopt);
  EXPECT_EQ(values[2], Bytes());
  EXPECT_EQ(values[3], to_bytes("from another client"));
  EXPECT_EQ(values[4], binary);
  EXPECT_TRUE(store_->delete_key("bin"));
  EXPECT_EQ(read_present(*client(), {"bin", "empty"}), (std::vector<std::optional<Bytes>>{std::nullopt, Bytes()}));
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
                         ::testing::Values(Kind::kHash, Kind::kFile, Kind::kTcp, Kind::kTcpWithoutToken,
                                           Kind::kPrefix),
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
    const auto took = Clock::now() - start;
    CHILD_CHECK(took >= 300ms);
    CHILD_CHECK(took <= 300ms + kTimeoutSlack);
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

TEST(PrefixStoreTest, ReadPresentOverATCPStoreSeesOnlyItsOwnNamespace) {
  const JobIdentity id = new_job_identity();
  auto server = std::make_shared<TCPStore>(server_of(id));
  auto base = std::make_shared<TCPStore>(client_of(server->port(), kTestTimeout, id));
  PrefixStore outer("job", base);
  auto middle = std::make_shared<PrefixStore>("group", std::make_shared<PrefixStore>("job", base));
  PrefixStore inner("watch", middle);
  inner.set("report/1", "one");
  outer.set("report/1", "outer's");
  base->set("report/2", "base's");
  EXPECT_EQ(read_present(inner, {"report/0", "report/1", "report/2"}),
            (std::vector<std::optional<Bytes>>{std::nullopt, to_bytes("one"), std::nullopt}));
  EXPECT_EQ(read_present(*server, {"job/group/watch/report/1", "job/report/1", "report/2"}),
            (std::vector<std::optional<Bytes>>{to_bytes("one"), to_bytes("outer's"), to_bytes("base's")}));
}

TEST(PrefixStoreTest, UsesItsOwnTimeout) {
  auto base = std::make_shared<HashStore>();
  base->set_timeout(kTestTimeout);
  PrefixStore p("p", base);
  p.set_timeout(100ms);
  const auto [message, took] = error_of<Timeout>([&] { p.get("missing"); });
  EXPECT_NE(message.find("'p/missing'"), std::string::npos) << message;
  EXPECT_NE(message.find("100 ms"), std::string::npos) << message;
  EXPECT_ENDED_AT_TIMEOUT(took, 100ms);
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

TEST(FileStoreTest, ARunReadsOnlyItsOwnKeysAndCountsOnlyItsOwnWorkers) {
  const std::string path = temp_path("runs");
  {
    // A previous job that crashed: its keys and one finished worker stay in the file.
    FileStore crashed(path, -1, "old_run");
    crashed.set("addr/0", "stale address");
    crashed.add("joined", 5);
    FileStore(path, 2, "old_run");  // the one of its two workers that finished
  }
  ASSERT_TRUE(file_exists(path));
  {
    FileStore a(path, 2, "new_run");
    a.set_timeout(200ms);
    // Not read: get() times out instead of answering with the old job's address.
    const auto [message, took] = error_of<Timeout>([&] { a.get("addr/0"); });
    EXPECT_NE(message.find("'addr/0'"), std::string::npos) << message;
    EXPECT_EQ(a.add("joined", 1), 1);
    EXPECT_EQ(a.num_keys(), 1);
    {
      FileStore b(path, 2, "new_run");
      b.set("addr/0", "fresh");
      EXPECT_EQ(a.get_string("addr/0"), "fresh");
    }
    // The old run's finished worker does not count: b alone does not delete the file.
    EXPECT_TRUE(file_exists(path));
    // A store without a run id reads neither run.
    EXPECT_EQ(FileStore(path).num_keys(), 0);
  }
  EXPECT_FALSE(file_exists(path));
}

TEST(FileStoreTest, IsCreatedPrivateAndRefusesAFileOthersCanWrite) {
  const std::string path = temp_path("mode");
  {
    FileStore s(path);
    s.set("k", "v");
  }
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  const auto [message, took] = error_of<StoreError>([&] { FileStore s(path); });
  EXPECT_NE(message.find("can be written by other users (mode 666)"), std::string::npos) << message;
  // Only root can give a file away, and not to every uid inside a sandbox.
  if (chown(path.c_str(), 12345, 12345) == 0) {
    ASSERT_EQ(chmod(path.c_str(), 0600), 0);
    const auto [other, took2] = error_of<StoreError>([&] { FileStore s(path); });
    EXPECT_NE(other.find("belongs to uid 12345, not to this user"), std::string::npos) << other;
  }
  std::remove(path.c_str());
}

// A process that holds the file's lock and never lets go: a rank stopped (SIGSTOP, a
// debugger) inside a store call, or an NFS client lost while it held the lock.
class StuckLockHolder {
 public:
  explicit StuckLockHolder(const std::string& path) {
    int ready[2];
    if (pipe(ready) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(path.c_str(), O_RDWR);
      if (fd < 0 || flock(fd, LOCK_EX) != 0) _exit(1);
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(1);
      pause();
      _exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    locked_ = read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
  }
  ~StuckLockHolder() { release(); }
  bool locked() const { return locked_; }
  void release() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  bool locked_ = false;
};

TEST(FileStoreTest, ALockHeldByAStoppedProcessCostsATimeoutNotAWaitForGood) {
  const std::string path = temp_path("held");
  FileStore s(path);
  s.set("k", "v");
  FileStore other(path);  // another rank: what it writes leaves s's view behind the file
  other.set("k3", "from the other rank");
  StuckLockHolder holder(path);
  ASSERT_TRUE(holder.locked());
  s.set_timeout(500ms);
  const auto [set_error, set_took] = error_of<Timeout>([&] { s.set("k2", "v"); });
  EXPECT_NE(set_error.find(", as long as this call could wait: a process of the job holds its lock"),
            std::string::npos)
      << set_error;
  EXPECT_NE(set_error.find(path), std::string::npos) << set_error;
  EXPECT_LT(set_took, 2s);
  // A wait's own timeout bounds its wait for the lock too (a reader whose view is behind
  // the file needs the lock; at its deadline it still gets a second of it).
  const auto [wait_error, wait_took] = error_of<Timeout>([&] { s.wait({"k3"}, 300ms); });
  EXPECT_NE(wait_error.find("stayed locked"), std::string::npos) << wait_error;
  EXPECT_LT(wait_took, 3s);
  // Another thread of this process that waits for the lock holds the store's mutex
  // meanwhile: a second call still ends by its own deadline, not by the first's.
  s.set_timeout(5s);
  std::thread first([&] { EXPECT_THROW(s.add("n", 1), Timeout); });
  std::this_thread::sleep_for(500ms);
  const auto [second_error, second_took] = error_of<Timeout>([&] { s.wait({"k3"}, 300ms); });
  EXPECT_LT(second_took, 3s) << second_error;
  EXPECT_NE(second_error.find("another thread of this process held the store all that time"), std::string::npos)
      << second_error;
  first.join();
  {
    // A thread's call deadline (call_deadline.h) bounds the wait for the lock too, and says
    // so in the Timeout its setter tells apart; a call made after it is not made at all.
    s.set_timeout(60s);
    internal::StoreCallDeadline bounded(std::chrono::steady_clock::now() + 300ms, "the test's scope");
    const auto [scoped_error, scoped_took] = error_of<internal::StoreCallCutShort>([&] { s.set("k3", "v"); });
    EXPECT_LT(scoped_took, 2s) << scoped_error;
    EXPECT_NE(scoped_error.find("(the deadline of the test's scope)"), std::string::npos) << scoped_error;
    const std::string late_error = error_of<internal::StoreCallCutShort>([&] { s.add("n", 1); }).first;
    EXPECT_EQ(late_error, "store ADD not made: the deadline of the test's scope has passed");
  }
  // Once the holder is gone, the store works again.
  holder.release();
  s.set("k2", "v2");
  EXPECT_EQ(s.get_string("k2"), "v2");
  std::remove(path.c_str());
}

// A wait its thread's call deadline ends while the file answers (the keys are not there)
// is a plain Timeout naming the scope, as TCPStore's answered "not yet": a StoreCallCutShort
// would tell a creation that the store did not answer.
TEST(FileStoreTest, AWaitItsCallDeadlineEndsIsAPlainTimeoutNamingTheScope) {
  const std::string path = temp_path("scoped_wait");
  FileStore s(path);
  bool cut_short = false;
  std::string message;
  {
    internal::StoreCallDeadline bounded(std::chrono::steady_clock::now() + 300ms, "the test's scope");
    message = error_of<Timeout>([&] {
                try {
                  s.wait({"never"}, 30s);
                } catch (const internal::StoreCallCutShort&) {
                  cut_short = true;
                  throw;
                }
              }).first;
  }
  EXPECT_FALSE(cut_short) << message;
  EXPECT_NE(message.find("'never'"), std::string::npos) << message;
  EXPECT_NE(message.find("(the deadline of the test's scope)"), std::string::npos) << message;
  std::remove(path.c_str());
}

TEST(FileStoreTest, AStoreBeingDestroyedDoesNotWaitForAStuckLockForLong) {
  const std::string path = temp_path("held_exit");
  auto s = std::make_unique<FileStore>(path, 2);
  s->set("k", "v");
  StuckLockHolder holder(path);
  ASSERT_TRUE(holder.locked());
  const auto start = std::chrono::steady_clock::now();
  s.reset();  // the store's timeout is 5 minutes; the goodbye waits 15 s
  EXPECT_LT(std::chrono::steady_clock::now() - start, 25s);
  holder.release();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace distcomm
