#include "tests/testing/failure_checks.h"

namespace distcomm {
namespace testing {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void mark_done(ProcessGroup& pg) { pg.store()->set("test/done/" + std::to_string(pg.rank()), "1"); }

void wait_for_done(ProcessGroup& pg, const std::vector<int>& ranks) {
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back("test/done/" + std::to_string(r));
  pg.store()->wait(keys, std::chrono::milliseconds(60000));
}

}  // namespace testing
}  // namespace distcomm
