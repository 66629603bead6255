#include "tests/testing/multiprocess.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/file_store.h"
#include "api/process/local_processes.h"
#include "api/process/local_ranks.h"
#include "api/store/tcp_store.h"

namespace distcomm {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

// Collects the gtest failures reported in this (child) process after fork, with their
// file, line and SCOPED_TRACE text, for the parent to print.
class FailureRecorder : public ::testing::EmptyTestEventListener {
 public:
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::ostringstream line;
    line << (result.file_name() ? result.file_name() : "?") << ":" << result.line_number() << ": "
         << result.message();
    if (!text_.empty()) text_ += "\n";
    text_ += line.str();
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// The child's side: runs fn with gtest's failures recorded, and returns what went wrong
// (fork_child reports it and exits).
std::string run_child(int rank, int size, const std::function<void(int, int)>& fn, bool had_failure) {
  auto* recorder = new FailureRecorder;  // owned by gtest's listener list from here on
  ::testing::UnitTest::GetInstance()->listeners().Append(recorder);
  std::string failure;
  try {
    fn(rank, size);
  } catch (...) {
    failure = "uncaught " + local::describe_current_exception();
  }
  std::string report = recorder->text();
  if (report.empty() && !had_failure && ::testing::Test::HasFailure()) report = "a gtest assertion failed";
  if (!failure.empty()) report += (report.empty() ? "" : "\n") + failure;
  return report;
}

// How a rank that failed on its own ended: what it reported, else its exit status.
std::string describe(const local::Child& c, int rank) {
  const std::string who = "rank " + std::to_string(rank);
  if (!c.report.empty() && WIFEXITED(c.status)) return who + " failed: " + c.report;
  return who + " failed: " + local::describe_wait_status(c.status);
}

std::string temp_root() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

// Rank 0 serves the TCPStore on a free port and leaves the port in a file for the others.
StorePtr make_tcp_store(const std::string& dir, int rank, int size, std::chrono::milliseconds timeout) {
  TCPStoreOptions o;
  o.host = "127.0.0.1";
  o.num_workers = size;
  o.timeout = timeout;
  if (rank == 0) {
    o.is_server = true;
    o.port = 0;
    auto store = std::make_shared<TCPStore>(o);
    std::ofstream(dir + "/port.tmp") << store->port();
    ::rename((dir + "/port.tmp").c_str(), (dir + "/port").c_str());  // others never read half a number
    return store;
  }
  const auto deadline = Clock::now() + timeout;
  while (!(std::ifstream(dir + "/port") >> o.port)) {
    if (Clock::now() > deadline) throw Timeout("rank 0 did not publish its TCPStore port in " + dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::make_shared<TCPStore>(o);
}

}  // namespace

std::string make_temp_dir() {
  std::string pattern = temp_root() + "/distcomm_group_XXXXXX";
  if (!::mkdtemp(pattern.data())) {
    throw std::runtime_error("mkdtemp(" + pattern + "): " + std::strerror(errno));
  }
  return pattern;
}

void remove_temp_dir(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") ::unlink((dir + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

void run_ranks(int size, const std::function<void(int rank, int size)>& fn, std::chrono::seconds timeout) {
  RunOptions options;
  options.timeout = timeout;
  run_ranks(size, fn, options);
}

void run_ranks(int size, const std::function<void(int rank, int size)>& fn, const RunOptions& options) {
  ASSERT_GE(size, 1) << "run_ranks needs at least one rank";
  const bool had_failure = ::testing::Test::HasFailure();
  local::RankWatchOptions watch;
  watch.time_limit = options.timeout;
  // Once a rank has failed, the others get the grace to end on their own.
  watch.grace = options.grace_after_failure;
  watch.after_failure = local::AfterFailure::kLetEnd;
  watch.may_be_killed = options.may_be_killed;
  local::LocalRanks ranks(watch);
  try {
    ranks.fork_ranks(size, [&](int r) { return run_child(r, size, fn, had_failure); });
  } catch (const local::RankStartError& e) {
    FAIL() << "cannot start rank " << e.rank << ": " << e.what();
  }
  ranks.watch();
  const std::string why_killed =
      ranks.stop_cause() == local::StopCause::kFailure
          ? "killed: still running " + std::to_string(options.grace_after_failure.count()) + " s after rank " +
                std::to_string(ranks.first_seen_failure()) + " failed"
          : "timed out: still running after " + std::to_string(options.timeout.count()) + " s";
  for (int r = 0; r < size; ++r) {
    const local::Child& c = ranks[static_cast<size_t>(r)];
    if (c.stopped) {
      ADD_FAILURE() << "rank " << r << " " << why_killed;
    } else if (ranks.failed(static_cast<size_t>(r))) {
      ADD_FAILURE() << describe(c, r);
    }
  }
}

void run_group(int size, const std::string& backend, const std::function<void(ProcessGroup& pg)>& fn,
               GroupHarnessOptions options) {
  const std::string dir = make_temp_dir();
  run_ranks(
      size,
      [&](int rank, int world) {
        StorePtr store;
        if (options.store == StoreKind::kTcp) {
          store = make_tcp_store(dir, rank, world, options.op_timeout);
        } else {
          store = std::make_shared<FileStore>(dir + "/store", world);
        }
        store->set_timeout(options.op_timeout);
        ProcessGroupOptions o;
        o.store = store;
        o.rank = rank;
        o.size = world;
        o.backend = backend;
        o.timeout = options.op_timeout;
        o.backend_config = options.backend_config;
        o.debug = options.debug;
        if (!options.host_ids.empty()) ::setenv("DISTCOMM_HOST_ID", options.host_ids.at(static_cast<size_t>(rank)).c_str(), 1);
        auto pg = ProcessGroup::create(o);
        fn(*pg);
      },
      options.run);
  remove_temp_dir(dir);
}

}  // namespace testing
}  // namespace distcomm
