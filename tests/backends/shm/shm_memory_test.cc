// The memory of shm's own segments per rank, with many ranks on a host. Every rank maps
// every rank's segment; what each process holds resident must not grow with the square of
// the ranks: the p2p rings (one per ordered pair) are touched only by pairs that transfer,
// and beyond a budget the peers' slots only where an op reads them. And what a process maps
// in at group creation is bounded over all its groups, not paid again by every group.
//
// Each rank sums, over its mappings of shm segments (/proc/self/smaps), what is mapped, what
// is resident (Rss) and its share of that (Pss), after collectives only, then after one
// pair's transfer. Rank 0 prints the smallest and largest of every rank's figures.
// DISTCOMM_SHM_MEMORY_RANKS sets the number of ranks (24 unless set; docs/shm.md's figures
// were taken with 16, 64 and 128).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;
using testing::GroupHarnessOptions;
using testing::run_group;

struct SegmentMemory {
  double mapped_mib = 0, rss_mib = 0, pss_mib = 0;
};

// Sums the smaps fields of every mapping of a distcomm shm segment.
SegmentMemory segment_memory() {
  SegmentMemory m;
  std::ifstream smaps("/proc/self/smaps");
  bool in_segment = false;
  for (std::string line; std::getline(smaps, line);) {
    std::istringstream in(line);
    std::string first;
    in >> first;
    if (first.find('-') != std::string::npos && first.find(':') == std::string::npos) {  // a mapping's first line
      in_segment = line.find("memfd:distcomm-shm-") != std::string::npos;
      continue;
    }
    if (!in_segment) continue;
    double kib = 0;
    in >> kib;
    if (first == "Size:") m.mapped_mib += kib / 1024;
    if (first == "Rss:") m.rss_mib += kib / 1024;
    if (first == "Pss:") m.pss_mib += kib / 1024;
  }
  return m;
}

int ranks_to_run() {
  const char* n = std::getenv("DISTCOMM_SHM_MEMORY_RANKS");
  return n && *n ? std::atoi(n) : 24;
}

// Each rank's figures through the store; rank 0 prints the range over the ranks.
void report(ProcessGroup& pg, const std::string& when, const SegmentMemory& m) {
  pg.store()->set("test/memory/" + when + "/" + std::to_string(pg.rank()),
                  std::to_string(m.mapped_mib) + " " + std::to_string(m.rss_mib) + " " + std::to_string(m.pss_mib));
  if (pg.rank() != 0) return;
  SegmentMemory lo{1e18, 1e18, 1e18}, hi;
  for (int r = 0; r < pg.size(); ++r) {
    std::istringstream in(pg.store()->get_string("test/memory/" + when + "/" + std::to_string(r)));
    SegmentMemory x;
    in >> x.mapped_mib >> x.rss_mib >> x.pss_mib;
    lo = {std::min(lo.mapped_mib, x.mapped_mib), std::min(lo.rss_mib, x.rss_mib), std::min(lo.pss_mib, x.pss_mib)};
    hi = {std::max(hi.mapped_mib, x.mapped_mib), std::max(hi.rss_mib, x.rss_mib), std::max(hi.pss_mib, x.pss_mib)};
  }
  std::fprintf(stderr,
               "[%d ranks, %s] shm segments per rank: mapped %.1f-%.1f MiB, resident (Rss) %.1f-%.1f MiB, "
               "proportional (Pss) %.2f-%.2f MiB\n",
               pg.size(), when.c_str(), lo.mapped_mib, hi.mapped_mib, lo.rss_mib, hi.rss_mib, lo.pss_mib, hi.pss_mib);
}

TEST(ShmMemory, SegmentsPerRankDoNotGrowWithTheSquareOfTheRanks) {
  GroupHarnessOptions options;
  options.op_timeout = milliseconds(300000);  // many processes on few cores
  options.run.timeout = std::chrono::seconds(600);
  run_group(ranks_to_run(), "shm", [](ProcessGroup& pg) {
    Tensor small = Tensor::zeros({2});
    Tensor large = Tensor::zeros({1 << 20});  // 4 MiB: the reduce-scatter + all-gather path
    pg.all_reduce(small)->wait();
    pg.all_reduce(large)->wait();
    pg.barrier()->wait();
    const SegmentMemory collectives = segment_memory();
    report(pg, "collectives only", collectives);
    EXPECT_LT(collectives.rss_mib, 100) << "resident shm segments of rank " << pg.rank() << " with no transfer";

    // One pair transfers: its ring's memory comes in, on those two ranks only.
    Tensor message = Tensor::zeros({1 << 18});
    if (pg.rank() == 0) pg.send(message, 1)->wait();
    if (pg.rank() == 1) pg.recv(message, 0)->wait();
    pg.barrier()->wait();
    const SegmentMemory after = segment_memory();
    report(pg, "after one pair's 1 MiB transfer", after);
    if (pg.rank() > 1) {
      EXPECT_LT(after.rss_mib - collectives.rss_mib, 0.1) << "a ring of another pair came in";
    }
  }, options);
}


// Every group maps in its collective areas at creation (no page faults in its first ops),
// but only while the process's groups stay within a budget (shm_populate_budget.h): 300
// groups of 3 ranks held 3.9 GB resident and took 22.7 s to create (helper-69), though they
// carried only small messages. Past the budget a group's memory comes in where its ops touch
// it: here 100 groups of 2 ranks that each run one small all_reduce, which populated would
// hold ~8 MiB each (two ranks' 4 x 1 MiB slots), 800 MiB in all.
TEST(ShmMemory, ManyGroupsWithSmallOpsStayWithinTheEagerBudget) {
  GroupHarnessOptions options;
  options.op_timeout = milliseconds(120000);
  options.run.timeout = std::chrono::seconds(300);
  run_group(2, "shm", [](ProcessGroup& pg) {
    std::vector<std::shared_ptr<ProcessGroup>> groups;
    for (int i = 0; i < 100; ++i) groups.push_back(pg.new_group({0, 1}));
    for (const auto& g : groups) {
      Tensor t = Tensor::of<float>({float(pg.rank() + 1)});
      g->all_reduce(t)->wait();
      ASSERT_EQ(t.to_doubles(), std::vector<double>{3}) << "rank " << pg.rank();
    }
    const SegmentMemory m = segment_memory();
    report(pg, "100 groups, one small all_reduce each", m);
    // 256 MiB of budget, and a few pages per lazily mapped group and segment.
    EXPECT_LT(m.rss_mib, 256 + 100 * 2 * 0.25) << "resident shm segments of rank " << pg.rank();
    EXPECT_GT(m.mapped_mib, 100 * 2 * 4) << "the groups' segments are all mapped, only not resident";
  }, options);
}

}  // namespace
}  // namespace distcomm
