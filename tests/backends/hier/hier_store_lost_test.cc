// A hierarchical op (2 hosts x 2 ranks, by hosts: 1 MiB) whose job store stops answering
// while the op waits: its Timeout must come within the fault suite's bound (timeout + 2 s)
// of the op's deadline, as flat gloo's does. An outside user cut a host's link mid-op
// (network namespaces): the cut host's ranks raised their Timeout 5.3 s after the op's
// deadline, the store's host's 1.3 s after it, flat gloo in the same layout 0.4 s. Here the
// store's server, a process of its own as a launcher's is, is stopped (SIGSTOP): no rank
// hears from it, as the cut host's ranks did not; rank 3 never issues the op, so that it
// waits in both levels (rank 2 within its host, ranks 0 and 1 across).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/store/tcp_store.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kRanks = 4;
constexpr int kServer = kRanks;  // the extra process that serves the store
constexpr milliseconds kOpTimeout{4000};
// The fault suite's bound past an op's deadline (tests/backends/fault/fault_suite.h).
constexpr double kSlack = 2.0;

bool exists(const std::string& path) { return std::ifstream(path).good(); }

void write_file(const std::string& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir + "/" + name + ".tmp") << text;
  ::rename((dir + "/" + name + ".tmp").c_str(), (dir + "/" + name).c_str());
}

std::string read_file(const std::string& dir, const std::string& name, Clock::time_point until) {
  std::string text;
  while (!(std::ifstream(dir + "/" + name) >> text)) {
    if (Clock::now() > until) throw Timeout("no " + name + " in " + dir);
    std::this_thread::sleep_for(milliseconds(10));
  }
  return text;
}

void wait_for(const std::string& dir, const std::vector<std::string>& names, Clock::time_point until) {
  for (const std::string& n : names) {
    while (!exists(dir + "/" + n) && Clock::now() < until) std::this_thread::sleep_for(milliseconds(10));
  }
}

TEST(HierStoreLost, AnOpWhoseStoreStopsAnsweringEndsWithinTwoSecondsOfItsDeadline) {
  const std::string dir = testing::make_temp_dir();
  testing::RunOptions run;
  run.timeout = std::chrono::seconds(90);
  testing::run_ranks(
      kRanks + 1,
      [&](int rank, int) {
        const auto until = Clock::now() + std::chrono::seconds(60);
        if (rank == kServer) {
          TCPStoreOptions o;
          o.host = "127.0.0.1";
          o.is_server = true;
          auto server = std::make_shared<TCPStore>(o);
          write_file(dir, "pid", std::to_string(::getpid()));
          write_file(dir, "port", std::to_string(server->port()));
          std::vector<std::string> left;
          for (int r = 0; r < kRanks; ++r) left.push_back("left" + std::to_string(r));
          wait_for(dir, left, until);
          return;
        }
        TCPStoreOptions o;
        o.host = "127.0.0.1";
        o.port = std::stoi(read_file(dir, "port", until));
        o.timeout = std::chrono::seconds(30);
        auto store = std::make_shared<TCPStore>(o);
        const std::string port = std::to_string(o.port);
        ::setenv("DISTCOMM_HOST_ID", rank < 2 ? "a" : "b", 1);
        ProcessGroupOptions po;
        po.store = store;
        po.rank = rank;
        po.size = kRanks;
        po.backend = "hier";
        po.timeout = std::chrono::seconds(30);
        {
          auto pg = ProcessGroup::create(po);
          ASSERT_NE(pg->backend_name().find("2 hosts x 2 ranks"), std::string::npos)
              << pg->backend_name();
          // 1 MiB: by hosts (from 64 KiB).
          Tensor t = Tensor::of<float>(std::vector<float>(size_t{1} << 18, float(rank + 1)));
          pg->all_reduce(t)->wait();
          ASSERT_EQ(t.item(0), 10.0);
          pg->barrier()->wait();
          const std::string stopped = "stopped";
          if (rank == 3) {
            // The others' all_reduce #2 has begun its levels: then the store goes silent.
            std::this_thread::sleep_for(milliseconds(1000));
            ASSERT_EQ(::kill(std::stoi(read_file(dir, "pid", until)), SIGSTOP), 0);
            write_file(dir, stopped, "1");
            wait_for(dir, {"done0", "done1", "done2"}, until);
            ::kill(std::stoi(read_file(dir, "pid", until)), SIGCONT);
          } else {
            AllReduceOptions ao;
            ao.timeout = kOpTimeout;
            const auto issued = Clock::now();
            std::string message;
            bool timed_out = false;
            try {
              pg->all_reduce(t, ao)->wait();
            } catch (const Timeout& e) {
              timed_out = true;
              message = e.what();
            } catch (const std::exception& e) {
              message = e.what();
            }
            const double late = std::chrono::duration<double>(Clock::now() - issued - kOpTimeout).count();
            std::fprintf(stderr, "rank %d: ended %.2f s after its deadline: %s\n", rank, late, message.c_str());
            write_file(dir, "done" + std::to_string(rank), "1");
            EXPECT_TRUE(timed_out) << "rank " << rank << ": " << message;
            EXPECT_TRUE(exists(dir + "/" + stopped)) << "rank " << rank << " ended before the store was stopped";
            EXPECT_GE(late, -0.5) << "rank " << rank << ": " << message;
            EXPECT_LT(late, kSlack) << "rank " << rank << " ended " << late << " s after the op's deadline: " << message;
            // Why nobody was named: the store, by its address, and what may have happened to it.
            EXPECT_NE(message.find("127.0.0.1:" + port), std::string::npos) << "rank " << rank << ": " << message;
            EXPECT_NE(message.find("did not answer"), std::string::npos) << "rank " << rank << ": " << message;
            EXPECT_NE(message.find("the network between this host and it is down"), std::string::npos)
                << "rank " << rank << ": " << message;
          }
          // Everyone's verdict is in: the store answers again, and the group goes.
          wait_for(dir, {"done0", "done1", "done2"}, until);
        }
        write_file(dir, "left" + std::to_string(rank), "1");
      },
      run);
  testing::remove_temp_dir(dir);
}

}  // namespace
}  // namespace distcomm
