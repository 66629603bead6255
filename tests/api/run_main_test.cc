// run_main: what a program's main() goes through, in a forked child each time (its exit
// status, its stderr, its error file).
#include "api/run_main.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process/failure_report.h"
#include "api/process_group.h"
#include "api/store/file_store.h"
#include "api/store/hash_store.h"
#include "tests/api/plugin_test_env.h"

namespace distcomm {
namespace {

struct Outcome {
  int status = 0;
  std::string err;
};

// Runs fn in a child with stderr captured; the child exits with what fn returns.
Outcome in_child(const std::function<int()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::_exit(fn());
  }
  ::close(fds[1]);
  Outcome o;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) o.err.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, &o.status, 0);
  return o;
}

std::string temp_file(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + std::to_string(::getpid());
}

TEST(RunMain, ReturnsWhatTheBodyReturns) {
  const Outcome o = in_child([] { return run_main("prog", [] { return 7; }); });
  ASSERT_TRUE(WIFEXITED(o.status));
  EXPECT_EQ(WEXITSTATUS(o.status), 7);
  EXPECT_EQ(o.err, "");
}

TEST(RunMain, AnErrorIsOneLineAndStatusOne) {
  const Outcome o = in_child([] {
    return run_main("prog", []() -> int { throw Timeout("rank 0/2 group 'world' all_reduce #3: timed out"); });
  });
  ASSERT_TRUE(WIFEXITED(o.status)) << o.err;
  EXPECT_EQ(WEXITSTATUS(o.status), 1);
  EXPECT_EQ(o.err, "prog: rank 0/2 group 'world' all_reduce #3: timed out\n");
}

// A user's own exception names no rank; under mpirun no launcher prefixes the line, so
// run_main leads it with the rank of the process's largest group. A group's own errors
// ("rank 0/2 group 'world' ...", above) name it already and stay as they are.
TEST(RunMain, AUserErrorIsLedByTheRank) {
  const Outcome o = in_child([] {
    return run_main("prog", []() -> int {
      use_test_plugins();
      ProcessGroupOptions po;
      po.store = std::make_shared<HashStore>();
      po.size = 1;
      po.backend = "single_rank";
      const ProcessGroupPtr pg = ProcessGroup::create(po);
      throw std::runtime_error("the data file is missing");
    });
  });
  ASSERT_TRUE(WIFEXITED(o.status)) << o.err;
  EXPECT_EQ(WEXITSTATUS(o.status), 1);
  EXPECT_EQ(o.err, "prog: rank 0/1: the data file is missing\n");
}

// A fault-tolerant job's next generation is smaller than the first (a member lost): the rank
// named is the latest generation's, not the first's (which the largest group would give).
// Three processes make a world of 3, then two of them a group of 2 ("gen2", no subgroup),
// in which this process is rank 1 and throws.
TEST(RunMain, TheRankIsTheLatestGenerationsNotTheLargestGroups) {
  const std::string world_file = temp_file("run_main_world"), gen2_file = temp_file("run_main_gen2");
  ::unlink(world_file.c_str());
  ::unlink(gen2_file.c_str());
  // world rank r; in gen2 (world ranks 1 and 2) rank r - 1.
  auto member = [&](int r) {
    use_test_plugins();
    ProcessGroupOptions world;
    world.store = std::make_shared<FileStore>(world_file, 3);
    world.rank = r;
    world.size = 3;
    world.backend = "any_size";
    ProcessGroupPtr first = ProcessGroup::create(world);
    if (r == 0) return first;
    ProcessGroupOptions gen2;
    gen2.store = std::make_shared<FileStore>(gen2_file, 2);
    gen2.group_name = "gen2";
    gen2.rank = r - 1;
    gen2.size = 2;
    gen2.backend = "any_size";
    return ProcessGroup::create(gen2);
  };
  std::vector<pid_t> others;
  for (int r : {0, 1}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      try {
        member(r);
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    others.push_back(pid);
  }
  const Outcome o = in_child([&] {
    return run_main("prog", [&]() -> int {
      ProcessGroupPtr latest = member(2);
      throw std::runtime_error("the data file is missing");
    });
  });
  for (pid_t pid : others) ::waitpid(pid, nullptr, 0);
  ASSERT_TRUE(WIFEXITED(o.status)) << o.err;
  EXPECT_EQ(o.err, "prog: rank 1/2: the data file is missing\n");
}

// A message that names the rank in its own words, or a distcomm launcher (DISTCOMM_ERROR_FILE:
// it names the failed rank itself, and prefixes its ranks' lines): no rank added.
TEST(RunMain, NoRankIsAddedWhereTheMessageOrTheLauncherNamesIt) {
  auto thrower = [](const std::string& what) {
    return [what]() -> int {
      use_test_plugins();
      ProcessGroupOptions po;
      po.store = std::make_shared<HashStore>();
      po.size = 1;
      po.backend = "single_rank";
      const ProcessGroupPtr pg = ProcessGroup::create(po);
      throw std::runtime_error(what);
    };
  };
  Outcome o = in_child([&] { return run_main("prog", thrower("rank 0 found a corrupt batch")); });
  EXPECT_EQ(o.err, "prog: rank 0 found a corrupt batch\n");
  o = in_child([&] { return run_main("prog", thrower("rank 10 is missing")); });
  EXPECT_EQ(o.err, "prog: rank 0/1: rank 10 is missing\n");
  const std::string file = temp_file("run_main_launched");
  o = in_child([&] {
    ::setenv("DISTCOMM_ERROR_FILE", file.c_str(), 1);
    return run_main("prog", thrower("the data file is missing"));
  });
  ::unlink(file.c_str());
  EXPECT_EQ(o.err, "prog: the data file is missing\n");
}

TEST(RunMain, TheErrorFileGetsTypeMessageAndTime) {
  const std::string file = temp_file("run_main_error");
  const int64_t before = FailureReport::now_ns();
  const Outcome o = in_child([&] {
    ::setenv(kErrorFileVariable, file.c_str(), 1);
    return run_main("prog", []() -> int { throw PeerFailure("rank 2 died"); });
  });
  EXPECT_EQ(WEXITSTATUS(o.status), 1);
  const auto report = FailureReport::read(file);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->message, "distcomm::PeerFailure: rank 2 died");
  EXPECT_GE(report->unix_time_ns, before);
  EXPECT_LE(report->unix_time_ns, FailureReport::now_ns());
  std::remove(file.c_str());
}

// The last line of defence: an exception escaping a thread of the program (or of a
// library) would call std::terminate and abort; the process ends with one line instead.
TEST(RunMain, AnExceptionEscapingAThreadEndsTheProcessWithOneLine) {
  const Outcome o = in_child([] {
    return run_main("prog", [] {
      std::thread([] { throw InvalidArgument("thrown on a library's thread"); }).join();
      return 0;
    });
  });
  ASSERT_TRUE(WIFEXITED(o.status)) << "not killed by a signal: " << o.err;
  EXPECT_EQ(WEXITSTATUS(o.status), 1);
  EXPECT_EQ(o.err, "prog: an exception was not caught (std::terminate): distcomm::InvalidArgument: thrown on a "
                   "library's thread\n");
}

}  // namespace
}  // namespace distcomm
