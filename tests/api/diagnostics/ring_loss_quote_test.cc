// A p2p ring over shm whose one rank is killed: shm passes the failure from rank to rank
// along the ring, each quoting the one before, and each rank's error quoted the whole chain
// ("rank 24 failed: rank 24/64 ...: rank 23 failed: rank 23/64 ..."): at 64 ranks the text
// was cut at ~1170 characters and ranks far from the dead one no longer named it. Every
// survivor must name the killed rank, and quote at most one other rank's failure (the
// first: the board's record) beside its own op.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>
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

constexpr int kSize = 16;
constexpr int kKilled = 5;

std::string message_file(int rank) { return temp_path("ring_loss_quote_" + std::to_string(rank) + ".msg"); }

// How many op descriptions of this group ("rank 7/16 group 'world'") the message holds.
int descriptions_in(const std::string& m) {
  int n = 0;
  for (int r = 0; r < kSize; ++r) {
    const std::string d = "rank " + std::to_string(r) + "/" + std::to_string(kSize) + " group 'world'";
    for (size_t at = m.find(d); at != std::string::npos; at = m.find(d, at + 1)) ++n;
  }
  return n;
}

TEST(RingLossQuote, EachSurvivorQuotesTheFirstFailureNotTheChain) {
  for (int r = 0; r < kSize; ++r) ::unlink(message_file(r).c_str());
  testing::GroupHarnessOptions options;
  options.op_timeout = std::chrono::milliseconds(20000);
  options.run.may_be_killed = {kKilled};
  testing::run_group(
      kSize, "shm",
      [](ProcessGroup& pg) {
        const int rank = pg.rank();
        std::string message = "(no error)";
        try {
          for (int it = 0; it < 1000; ++it) {
            if (rank == kKilled && it == 5) ::raise(SIGKILL);
            Tensor out = Tensor::zeros({1024}, DType::kInt32);
            Tensor in = Tensor::zeros({1024}, DType::kInt32);
            std::vector<P2POp> ops{P2POp::send(out, (rank + 1) % kSize), P2POp::recv(in, (rank + kSize - 1) % kSize)};
            pg.batch_isend_irecv(ops)->wait();
          }
        } catch (const Error& e) {
          message = e.what();
        }
        std::ofstream(message_file(rank), std::ios::binary | std::ios::trunc) << message;
      },
      options);
  for (int r = 0; r < kSize; ++r) {
    if (r == kKilled) continue;
    const std::string m = read_file(message_file(r));
    EXPECT_NE(m.find("rank " + std::to_string(kKilled)), std::string::npos) << "rank " << r << ": " << m;
    // Its own op, the batch's transfer, and at most the first failure's op.
    EXPECT_LE(descriptions_in(m), 3) << "rank " << r << " quotes a chain: " << m;
  }
}

}  // namespace
}  // namespace distcomm
