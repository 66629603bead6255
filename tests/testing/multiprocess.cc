#include "tests/testing/multiprocess.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

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
#include "api/file_store.h"
#include "api/tcp_store.h"

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

std::string exception_type_name() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (!type) return "unknown";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type->name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : type->name();
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The child's side: run fn, report failures through the pipe, exit without running the
// parent's atexit handlers or gtest's teardown.
[[noreturn]] void run_child(int rank, int size, const std::function<void(int, int)>& fn, int report_fd,
                            bool had_failure) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a harness that died
  auto* recorder = new FailureRecorder;  // owned by gtest's listener list from here on
  ::testing::UnitTest::GetInstance()->listeners().Append(recorder);
  std::string failure;
  try {
    fn(rank, size);
  } catch (const std::exception& e) {
    failure = "uncaught " + exception_type_name() + ": " + e.what();
  } catch (...) {
    failure = "uncaught exception of type " + exception_type_name();
  }
  std::string report = recorder->text();
  if (report.empty() && !had_failure && ::testing::Test::HasFailure()) report = "a gtest assertion failed";
  if (!failure.empty()) report += (report.empty() ? "" : "\n") + failure;
  write_all(report_fd, report);
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(report.empty() ? 0 : 1);
}

struct Child {
  pid_t pid = -1;
  int report_fd = -1;
  std::string report;
  bool exited = false;
  int status = 0;
  bool killed_by_harness = false;
};

void drain(Child& c) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(c.report_fd, buf, sizeof(buf));
    if (n > 0) {
      c.report.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // EAGAIN or end of file
  }
}

bool failed(const Child& c, const RunOptions& options, int rank) {
  if (!c.exited) return false;
  if (WIFEXITED(c.status)) return WEXITSTATUS(c.status) != 0;
  return !(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL && !c.killed_by_harness &&
           options.may_be_killed.count(rank));
}

std::string describe(const Child& c, int rank, const std::string& why_killed) {
  std::ostringstream out;
  out << "rank " << rank;
  if (c.killed_by_harness) {
    out << " " << why_killed;
  } else if (WIFSIGNALED(c.status)) {
    out << " killed by signal " << WTERMSIG(c.status) << " (" << strsignal(WTERMSIG(c.status)) << ")";
  } else if (!c.report.empty()) {
    out << " failed: " << c.report;
  } else {
    out << " exited with status " << WEXITSTATUS(c.status);
  }
  return out.str();
}

std::string temp_root() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

// A fresh folder per run_group call, so concurrent tests and earlier runs never share a store.
std::string make_temp_dir() {
  std::string pattern = temp_root() + "/distcomm_group_XXXXXX";
  if (!::mkdtemp(pattern.data())) {
    throw std::runtime_error("mkdtemp(" + pattern + "): " + std::strerror(errno));
  }
  return pattern;
}

void remove_dir(const std::string& dir) {
  for (const char* name : {"/store", "/port", "/port.tmp"}) ::unlink((dir + name).c_str());
  ::rmdir(dir.c_str());
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

void run_ranks(int size, const std::function<void(int rank, int size)>& fn, std::chrono::seconds timeout) {
  RunOptions options;
  options.timeout = timeout;
  run_ranks(size, fn, options);
}

void run_ranks(int size, const std::function<void(int rank, int size)>& fn, const RunOptions& options) {
  ASSERT_GE(size, 1) << "run_ranks needs at least one rank";
  std::fflush(stdout);  // children would print the parent's buffered output again
  std::fflush(stderr);
  const bool had_failure = ::testing::Test::HasFailure();
  std::vector<Child> children(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0) << std::strerror(errno);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork: " << std::strerror(errno);
    if (pid == 0) {
      ::close(fds[0]);
      run_child(r, size, fn, fds[1], had_failure);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    children[static_cast<size_t>(r)].pid = pid;
    children[static_cast<size_t>(r)].report_fd = fds[0];
  }

  auto deadline = Clock::now() + options.timeout;
  std::string why_killed = "timed out: still running after " + std::to_string(options.timeout.count()) + " s";
  int running = size;
  while (running > 0) {
    std::vector<pollfd> fds;
    for (auto& c : children) fds.push_back({c.report_fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 20);
    for (int r = 0; r < size; ++r) {
      Child& c = children[static_cast<size_t>(r)];
      drain(c);
      if (c.exited || ::waitpid(c.pid, &c.status, WNOHANG) != c.pid) continue;
      c.exited = true;
      --running;
      drain(c);
      if (failed(c, options, r) && Clock::now() + options.grace_after_failure < deadline) {
        deadline = Clock::now() + options.grace_after_failure;
        why_killed = "killed: still running " + std::to_string(options.grace_after_failure.count()) +
                     " s after rank " + std::to_string(r) + " failed";
      }
    }
    if (running > 0 && Clock::now() > deadline) {
      for (auto& c : children) {
        if (c.exited) continue;
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, &c.status, 0);
        c.exited = true;
        c.killed_by_harness = true;
        drain(c);
      }
      running = 0;
    }
  }
  for (int r = 0; r < size; ++r) {
    Child& c = children[static_cast<size_t>(r)];
    ::close(c.report_fd);
    if (c.killed_by_harness || failed(c, options, r)) ADD_FAILURE() << describe(c, r, why_killed);
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
        auto pg = ProcessGroup::create(o);
        fn(*pg);
      },
      options.run);
  remove_dir(dir);
}

}  // namespace testing
}  // namespace distcomm
