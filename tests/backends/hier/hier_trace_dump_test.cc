// A hierarchical op that fails writes one trace dump on each rank, named after the op the
// program issued. Its levels' ops (the groups within and across hosts) fail first, and each
// wrote a dump of its own: every rank of an outside user's 4 hosts x 4 ranks printed
// "trace dump (PeerFailure ...) written to ..." twice, the survivors on the dead rank's host
// first naming an op the program never issued ("PeerFailure in all_gather #127", a level's).
#include <signal.h>
#include <stdlib.h>

#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

constexpr int kVictim = 3;  // host b, local rank 1

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(HierTraceDump, AFailedOpIsDumpedOnceUnderTheProgramsOp) {
  const std::string dir = testing::temp_path("dumps");
  ::setenv("DISTCOMM_TRACE_DIR", dir.c_str(), 1);  // the ranks, forked, inherit it
  testing::GroupHarnessOptions options;
  options.host_ids = {"a", "a", "b", "b"};
  options.op_timeout = std::chrono::seconds(20);
  options.run.may_be_killed = {kVictim};
  testing::run_group(
      4, "hier",
      [&](ProcessGroup& pg) {
        ASSERT_EQ(pg.backend_for(DeviceType::kCPU).name(), "hier");
        Tensor t = Tensor::of<float>(std::vector<float>(size_t{16} << 20, float(pg.rank() + 1)));
        pg.barrier()->wait();
        if (pg.rank() == kVictim) ::raise(SIGKILL);
        std::string said;
        uint64_t seq = 0;
        {
          testing::CapturedStderr captured;
          WorkPtr work = pg.all_reduce(t);  // 64 MiB: by hosts, on the levels
          seq = work->seq();
          try {
            work->wait();
            ADD_FAILURE() << "rank " << pg.rank() << ": the op succeeded with rank " << kVictim << " dead";
          } catch (const Error&) {
          }
          said = captured.text();
        }
        std::fprintf(stderr, "rank %d said:\n%s", pg.rank(), said.c_str());
        EXPECT_EQ(count_of(said, "distcomm: trace dump ("), 1u) << "rank " << pg.rank() << ":\n" << said;
        EXPECT_NE(said.find(" in all_reduce #" + std::to_string(seq) + ") written to "), std::string::npos)
            << "rank " << pg.rank() << " named another op than the program's all_reduce #" << seq << ":\n" << said;
      },
      options);
  ::unsetenv("DISTCOMM_TRACE_DIR");
}

}  // namespace
}  // namespace distcomm
