// Ranks that ask init for different backends (DISTCOMM_BACKEND set for some ranks only, as
// helper-66 tried): each rank's arrival at the creation holds its backend, so a rank that
// asked for another than rank 0 refuses at once, and its refusal ends rank 0's wait too.
// Before, each waited in its own backend's rendezvous until the timeout (30 minutes by
// default) and then blamed the other as "stuck or gone".
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/store/file_store.h"
#include "api/store/hash_store.h"
#include "tests/testing/in_process_group.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;

TEST(BackendAgreement, RanksThatAskForDifferentBackendsFailAtOnceNamingBoth) {
  char pattern[] = "/tmp/distcomm_backend_agreement_XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string store_path = std::string(pattern) + "/store";
  testing::run_ranks(3, [&](int rank, int size) {
    ProcessGroupOptions o;
    o.store = std::make_shared<FileStore>(store_path, size);
    o.rank = rank;
    o.size = size;
    o.backend = rank == 1 ? "shm" : "gloo";
    o.timeout = std::chrono::seconds(20);
    const auto start = Clock::now();
    std::string what = "no error";
    try {
      ProcessGroup::create(o);
    } catch (const Error& e) {
      what = e.what();
    }
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_NE(what.find("rank 1 asked for backend 'shm', rank 0 for 'gloo'; every rank must ask for the same"),
              std::string::npos)
        << "rank " << rank << ": " << what;
    EXPECT_LT(took, 10.0) << "rank " << rank << " waited toward the 20 s timeout: " << what;
  });
  ::unlink(store_path.c_str());
  ::rmdir(pattern);
}

// The same device list in another order is the same backend: the ranks compare each
// spec's device map, not its text. (A list and a single name are compared as written:
// "auto" may add nccl where "cpu:auto" never does.)
TEST(BackendAgreement, ADeviceListInAnotherOrderIsTheSameBackend) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(2);
  std::vector<ProcessGroupPtr> groups(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      testing::InProcessOptions o;
      o.timeout = std::chrono::seconds(20);
      o.backend = r == 0 ? "cpu:in_process,cuda:in_process_cuda" : "CUDA:in_process_cuda,cpu:in_process";
      try {
        groups[static_cast<size_t>(r)] = testing::in_process_rank(store, r, 2, o);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

}  // namespace
}  // namespace distcomm
