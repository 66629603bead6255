// A process at its limits (ulimit -v, ulimit -u; tests run as root, for whom only the first
// is enforced): no exception escapes a thread of the core's diagnostics, and a thread that
// cannot start is named. Each case runs in a forked child, whose abort (std::terminate)
// is what the parent looks for: before, a bounded call that could not get its thread or
// its memory threw out of the stall watch's thread, and the rank died of SIGABRT without a
// word.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "api/diagnostics/bounded_call.h"
#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/stall_watch.h"
#include "api/errors.h"
#include "api/store/hash_store.h"
#include "tests/testing/forwarding_store.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

// Runs body in a forked child with its stderr in `log` (when given); returns the child's
// wait status. body returns the child's exit code.
int in_child(const std::function<int()>& body, const std::string& log = "") {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!log.empty() && !std::freopen(log.c_str(), "w", stderr)) ::_exit(90);
    const int code = body();
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status)) + " (6: SIGABRT, std::terminate)";
  return "status " + std::to_string(status);
}

// This process's address space now (VmSize), in bytes.
size_t address_space_in_use() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoul(line.substr(7)) * 1024;
  }
  return 0;
}

// ulimit -v just above what is in use: no room for a thread's stack (8 MiB by default).
bool limit_address_space(size_t room) {
  const rlimit rl{address_space_in_use() + room, RLIM_INFINITY};
  return ::setrlimit(RLIMIT_AS, &rl) == 0;
}

// Takes all the memory the limit leaves (never freed: the child ends).
void use_up_memory() {
  for (size_t size : {size_t{1} << 20, size_t{1} << 16, size_t{4096}, size_t{256}, size_t{32}, size_t{8}}) {
    while (std::malloc(size) != nullptr) {
    }
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + "." + std::to_string(::getpid());
}

TEST(BoundedCallWithoutAThread, NoThreadForTheCallIsNoAnswerNotAnException) {
  const int status = in_child([] {
    std::function<std::string()> fn = [] { return std::string("answer"); };
    std::function<bool()> never = [] { return false; };
    std::atomic<bool> gone{false};
    if (!limit_address_space(size_t{1} << 20)) return 3;
    if (internal::call_with_limit<std::string>(fn, milliseconds(200), &gone)) return 4;
    if (gone.load()) return 5;  // the store did not fail to answer: no thread was had
    if (internal::call_with_limit_until<std::string>(fn, milliseconds(200), never)) return 6;
    internal::call_each_with_limit<std::string>({fn, fn}, milliseconds(200));
    return 0;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
}

TEST(BoundedCallWithoutAThread, NoMemoryForTheCallIsNoAnswerNotAnException) {
  // ulimit -v at a large all_reduce's peak: the call's own state (its packaged_task) cannot
  // be allocated. That std::bad_alloc escaped the stall watch's thread (std::terminate).
  const int status = in_child([] {
    std::function<std::string()> fn = [] { return std::string("answer"); };
    std::function<bool()> never = [] { return false; };
    if (!limit_address_space(size_t{32} << 20)) return 3;
    use_up_memory();
    if (internal::call_with_limit<std::string>(fn, milliseconds(200))) return 4;
    if (internal::call_with_limit_until<std::string>(fn, milliseconds(200), never)) return 6;
    return 0;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
}

// A board whose reads and add() throw what no `catch (const std::exception&)` catches: an
// idle look reads (read_present: check() and get() on a store with no GET_PRESENT), a
// probing one adds.
class ThrowingBoard : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  int64_t add(const std::string&, int64_t) override { throw 42; }
  bool check(const std::vector<std::string>&) override { throw 42; }
};

TEST(StallWatchThread, AnExceptionInALookIsLoggedOnceAndTheWatchCarriesOn) {
  const std::string log = temp_path("stall_watch_throw.log");
  const int status = in_child(
      [] {
        StorePtr board = std::make_shared<ThrowingBoard>(std::make_shared<HashStore>());
        GroupFailure failure{0, board};
        StallWatchOptions o;
        o.rank = 0;
        o.size = 2;
        o.board = board;
        o.tick = milliseconds(50);
        StallWatch watch(o, failure);
        std::this_thread::sleep_for(milliseconds(400));  // several ticks, each one throwing
        watch.stop();
        return 0;
      },
      log);
  const std::string text = read_file(log);
  std::remove(log.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status) << "\n" << text;
  const size_t line = text.find("distcomm: the stall watch of rank 0/2's group failed in a look at the board: ");
  EXPECT_NE(line, std::string::npos) << text;
  EXPECT_NE(text.find("it carries on"), std::string::npos) << text;
  EXPECT_EQ(text.find("the stall watch of", text.find("the stall watch of") + 1), std::string::npos) << "logged more than once:\n" << text;
}

TEST(StallWatchThread, AWatchWhoseThreadCannotStartSaysWhichThreadAndWhatLimit) {
  const std::string log = temp_path("stall_watch_start.log");
  const int status = in_child(
      [] {
        StorePtr board = std::make_shared<HashStore>();
        GroupFailure failure{0, board};
        StallWatchOptions o;
        o.board = board;
        if (!limit_address_space(size_t{1} << 20)) return 3;
        try {
          StallWatch watch(o, failure);
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          return 0;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "not a distcomm::Error: %s\n", e.what());
          return 7;
        }
        return 8;  // the thread started: the limit did not hold
      },
      log);
  const std::string text = read_file(log);
  std::remove(log.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status) << "\n" << text;
  EXPECT_NE(text.find("cannot start a thread for the stall watch of rank 0/1's group"), std::string::npos) << text;
  EXPECT_NE(text.find("ulimit -v"), std::string::npos) << text;
}

}  // namespace
}  // namespace distcomm
