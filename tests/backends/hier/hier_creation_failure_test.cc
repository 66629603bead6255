// A rank whose part of a hierarchical group's creation fails (here: a bad shm setting on that
// rank alone, found when its shm level is made) ends every other rank's creation soon,
// naming it, on its own host and on the other: the other host's ranks wait for it in a level
// (across) that it never reached, and must learn of the failure from the group's creation,
// not from that level's deadline. And ranks that disagree on the hierarchy's setting
// hier_across all refuse at once, naming who said what.
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
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
// Well under the timeout: the others look at the creation's failure every 0.5 s.
constexpr double kSoonSeconds = 10.0;

struct Outcome {
  std::string kind;  // "InvalidArgument", "PeerFailure", another error's what, or "none"
  std::string message;
  double seconds = 0;
};

// 4 ranks on hosts a, a, b, b create a "hier" group, each with config_of(rank); check(rank,
// outcome) runs in each rank's process.
void create_on_two_by_two(const std::function<std::map<std::string, std::string>(int rank)>& config_of,
                          const std::function<void(int rank, const Outcome&)>& check) {
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
        o.backend_config = config_of(rank);
        const auto start = Clock::now();
        Outcome out;
        try {
          ProcessGroup::create(o);
          out.kind = "none";
        } catch (const InvalidArgument& e) {
          out.kind = "InvalidArgument";
          out.message = e.what();
        } catch (const PeerFailure& e) {
          out.kind = "PeerFailure";
          out.message = e.what();
        } catch (const std::exception& e) {
          out.kind = e.what();
        }
        out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        std::fprintf(stderr, "rank %d after %.2f s: %s: %s\n", rank, out.seconds, out.kind.c_str(), out.message.c_str());
        check(rank, out);
        EXPECT_LT(out.seconds, kSoonSeconds) << "rank " << rank << ": " << out.message;
      },
      run);
  testing::remove_temp_dir(dir);
}

TEST(HierCreationFailure, ARankWhoseShmLevelFailsEndsEveryRanksCreationSoonNamingIt) {
  constexpr int kFailing = 3;  // host b, local rank 1
  create_on_two_by_two(
      [](int rank) {
        std::map<std::string, std::string> config;
        if (rank == kFailing) config["shm_slots"] = "1";  // below its minimum, 2
        return config;
      },
      [](int rank, const Outcome& out) {
        EXPECT_EQ(out.kind, rank == kFailing ? "InvalidArgument" : "PeerFailure") << "rank " << rank;
        EXPECT_NE(out.message.find("shm_slots"), std::string::npos) << "rank " << rank << ": " << out.message;
        if (rank != kFailing) {
          EXPECT_NE(out.message.find("rank 3"), std::string::npos) << "rank " << rank << ": " << out.message;
        }
        // The plugin's refusal of the value, with the rank (in its level and in the world),
        // group and backend that refused it.
        if (rank == kFailing) {
          EXPECT_EQ(out.message.rfind("rank 1/2 (world rank 3) group 'world/hier_host1' (shm): shm", 0), 0u) << out.message;
        }
      });
}

TEST(HierCreationFailure, RanksThatDisagreeOnHierAcrossAllRefuseNamingWhoSaidWhat) {
  create_on_two_by_two(
      [](int rank) { return std::map<std::string, std::string>{{"hier_across", rank == 2 ? "auto" : "gloo"}}; },
      [](int rank, const Outcome& out) {
        EXPECT_EQ(out.kind, "InvalidArgument") << "rank " << rank;
        EXPECT_NE(out.message.find("the ranks disagree on backend setting 'hier_across' (DISTCOMM_HIER_ACROSS): auto on "
                                   "ranks [2], gloo on ranks [0, 1, 3]"),
                  std::string::npos)
            << "rank " << rank << ": " << out.message;
      });
}

}  // namespace
}  // namespace distcomm
