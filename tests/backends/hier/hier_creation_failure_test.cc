// A rank whose part of a hierarchical group's creation fails (here: a bad shm setting on
// that rank alone, found when its shm level is made) ends every other rank's creation soon,
// naming it, on its own host and on the other: the other host's ranks wait for it in a level
// (across) that it never reached, and must learn of the failure from the group's creation,
// not from that level's deadline.
#include <chrono>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/process_group.h"
#include "api/store/file_store.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kTimeout{30};
constexpr int kFailing = 3;  // host b, local rank 1
// Well under the timeout: the others look at the creation's failure every 0.5 s.
constexpr double kSoonSeconds = 10.0;

void expect_creation_fails_soon(const std::string& across) {
  const std::string dir = testing::make_temp_dir();
  testing::RunOptions run;
  run.timeout = std::chrono::seconds(90);
  testing::run_ranks(
      4,
      [&](int rank, int world) {
        const char* hosts[] = {"a", "a", "b", "b"};
        ::setenv("DISTCOMM_HOST_ID", hosts[rank], 1);
        auto store = std::make_shared<FileStore>(dir + "/store", world);
        store->set_timeout(kTimeout);
        ProcessGroupOptions o;
        o.store = store;
        o.rank = rank;
        o.size = world;
        o.backend = "hier";
        o.timeout = kTimeout;
        if (!across.empty()) o.backend_config["hier_across"] = across;
        if (rank == kFailing) o.backend_config["shm_slots"] = "1";  // below its minimum, 2
        const auto start = Clock::now();
        std::string message;
        bool peer_failure = false, invalid = false;
        try {
          ProcessGroup::create(o);
        } catch (const InvalidArgument& e) {
          invalid = true;
          message = e.what();
        } catch (const PeerFailure& e) {
          peer_failure = true;
          message = e.what();
        } catch (const std::exception& e) {
          message = e.what();
        }
        const double took = std::chrono::duration<double>(Clock::now() - start).count();
        std::fprintf(stderr, "rank %d after %.2f s: %s\n", rank, took, message.c_str());
        if (rank == kFailing) {
          EXPECT_TRUE(invalid) << "rank " << rank << ": " << message;
          EXPECT_NE(message.find("shm_slots"), std::string::npos) << message;
        } else {
          EXPECT_TRUE(peer_failure) << "rank " << rank << " after " << took << " s: " << message;
          EXPECT_NE(message.find("rank 3"), std::string::npos) << "rank " << rank << ": " << message;
          EXPECT_NE(message.find("shm_slots"), std::string::npos) << "rank " << rank << ": " << message;
        }
        EXPECT_LT(took, kSoonSeconds) << "rank " << rank << ": " << message;
      },
      run);
  testing::remove_temp_dir(dir);
}

TEST(HierCreationFailure, ARankWhoseShmLevelFailsEndsEveryRanksCreationSoonNamingIt) {
  expect_creation_fails_soon("");
}

}  // namespace
}  // namespace distcomm
