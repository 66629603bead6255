// A ring of batch_isend_irecv over gloo whose one rank stops (SIGSTOP): every survivor's error
// must name the stopped rank. Found at 16 ranks: the first rank to time out waited on an
// innocent rank (its predecessor, itself waiting on the one before), its Timeout said that
// rank "has no transfer with this rank pending", and every other rank adopted that, so no
// survivor named the stopped rank in 3 runs of 4 (a collective's Timeout named it).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

using testing::read_file;
using testing::temp_path;

constexpr int kSize = 8;
constexpr int kStopped = 3;
constexpr int kStopAt = 5;  // the iteration at which the stopped rank stops
// The rank whose transfers time out first: three hops after the stopped rank, so that the
// peer it blames (its predecessor) is innocent, as the first to time out at 16 ranks was.
constexpr int kFirstToTimeOut = (kStopped + 3) % kSize;

std::string file_of(const std::string& what, int rank) {
  return temp_path("gloo_p2p_stopped_" + what + "_" + std::to_string(rank));
}

bool exists(const std::string& path) { return std::ifstream(path).good(); }

TEST(GlooP2pStoppedRank, EverySurvivorNamesTheStoppedRank) {
  for (int r = 0; r < kSize; ++r) {
    ::unlink(file_of("msg", r).c_str());
    ::unlink(file_of("pid", r).c_str());
  }
  testing::GroupHarnessOptions options;
  options.op_timeout = std::chrono::milliseconds(8000);
  options.run.may_be_killed = {kStopped};
  options.run.timeout = std::chrono::seconds(90);
  testing::run_group(
      kSize, "gloo",
      [](ProcessGroup& pg) {
        const int rank = pg.rank();
        std::string message = "(no error)";
        try {
          for (int it = 0; it < 1000; ++it) {
            if (rank == kStopped && it == kStopAt) {
              std::ofstream(file_of("pid", rank)) << ::getpid();
              ::raise(SIGSTOP);  // killed by rank 0 once every survivor has said its error
            }
            Tensor out = Tensor::zeros({4096}, DType::kInt32);
            Tensor in = Tensor::zeros({4096}, DType::kInt32);
            std::vector<P2POp> ops{P2POp::send(out, (rank + 1) % kSize), P2POp::recv(in, (rank + kSize - 1) % kSize)};
            P2POptions o;
            if (rank == kFirstToTimeOut) o.timeout = std::chrono::milliseconds(2000);
            pg.batch_isend_irecv(ops, o)->wait();
          }
        } catch (const Error& e) {
          message = e.what();
        }
        std::ofstream(file_of("msg", rank), std::ios::binary | std::ios::trunc) << message;
        if (rank != 0) return;
        // Rank 0 ends the stopped rank once the others have written (bounded: a survivor
        // that never fails is the test's failure, not a hang).
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(40);
        for (int r = 1; r < kSize; ++r) {
          while (r != kStopped && !exists(file_of("msg", r)) && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
        }
        std::ifstream pid_file(file_of("pid", kStopped));
        int pid = 0;
        if (pid_file >> pid && pid > 0) ::kill(pid, SIGKILL);
      },
      options);
  // Named directly ("rank 3 did not report: ...") or at the end of the waits ("it waits on
  // rank 4, which waits on rank 3, which did not report: ...").
  const std::string named = "rank " + std::to_string(kStopped) + " did not report: its process";
  const std::string reached = "rank " + std::to_string(kStopped) + ", which did not report: its process";
  for (int r = 0; r < kSize; ++r) {
    if (r == kStopped) continue;
    const std::string m = read_file(file_of("msg", r));
    EXPECT_TRUE(m.find(named) != std::string::npos || m.find(reached) != std::string::npos) << "rank " << r << ": " << m;
    EXPECT_NE(m.find("is stopped (SIGSTOP"), std::string::npos) << "rank " << r << ": " << m;
  }
}

}  // namespace
}  // namespace distcomm
