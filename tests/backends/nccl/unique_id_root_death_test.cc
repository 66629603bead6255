// The ncclUniqueId exchange when its root is killed outright (SIGKILL) while making the id:
// a rank waiting on the same host learns it within about a second, naming rank 0 and its
// process, instead of waiting to the deadline. Real processes, no CUDA: the root is a
// forked child whose id-making step (the make() the exchange takes) blocks until it is
// killed; the store is a FileStore both processes open.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/file_store.h"
#include "backends/nccl/unique_id_exchange.h"

namespace distcomm {
namespace nccl {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const char kKey[] = "nccl/1/comm0/unique_id";
const char kLabel[] = "NCCL communicator #0 of group 'world'";

// Kills and reaps the child if the test ends early.
struct Child {
  pid_t pid = -1;
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(UniqueIdRootDeathTest, ARootKilledWhileMakingTheIdFailsItsPeerPromptlyNamingRankZero) {
  char dir[] = "/tmp/nccl_root_death_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/store";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);

  Child root;
  root.pid = ::fork();
  ASSERT_GE(root.pid, 0);
  if (root.pid == 0) {
    // Rank 0: its make() says it has started, then never returns (a hung or slow
    // ncclGetUniqueId) until the parent kills this process.
    ::close(ready[0]);
    FileStore store(path);
    std::atomic<bool> aborted{false};
    UniqueIdExchange x{&store, kKey, true, 128, kLabel, 0, 2, {}};
    exchange_unique_id(
        x,
        [&]() -> Store::Bytes {
          const char c = 'm';
          (void)!::write(ready[1], &c, 1);
          for (;;) ::pause();
        },
        Clock::now() + 60s, aborted);
    ::_exit(3);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "rank 0 did not reach the id's making";
  ::close(ready[0]);

  FileStore store(path);
  std::atomic<bool> aborted{false};
  UniqueIdExchange x{&store, kKey, false, 128, kLabel, 1, 2, {}};
  // The deadline far past the bound checked: without the root's watch the wait ends there.
  const auto deadline = Clock::now() + 20s;
  auto waiter = std::async(std::launch::async, [&]() -> std::string {
    try {
      exchange_unique_id(x, nullptr, deadline, aborted);
      return "returned an id";
    } catch (const PeerFailure& e) {
      return std::string("PeerFailure: ") + e.what();
    } catch (const std::exception& e) {
      return std::string("other error: ") + e.what();
    }
  });
  std::this_thread::sleep_for(300ms);  // rank 1 is waiting in the store
  const pid_t killed = root.pid;
  ASSERT_EQ(::kill(killed, SIGKILL), 0);
  const auto start = Clock::now();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready)
      << "rank 1 still waits 5 s after rank 0 was killed (it would wait to the deadline)";
  EXPECT_LT(Clock::now() - start, 3s);
  const std::string m = waiter.get();
  EXPECT_EQ(m.rfind("PeerFailure: ", 0), 0u) << m;
  EXPECT_NE(m.find("rank 1 of 2 stopped waiting for rank 0's ncclUniqueId"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 0 (pid " + std::to_string(killed)), std::string::npos) << m;
  ::waitpid(root.pid, nullptr, 0);
  root.pid = -1;
  std::system(("rm -rf " + std::string(dir)).c_str());
}

}  // namespace
}  // namespace nccl
}  // namespace distcomm
