// The ranks of a job started by hand, as a user would start them: each a program with RANK,
// WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port) and the job's identity in
// its environment, its stdout and stderr together in the order written.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "api/process/job_identity.h"
#include "tests/api/store/store_test_util.h"
#include "tests/testing/subprocess.h"

namespace distcomm {
namespace testing {

class HandStartedJob {
 public:
  explicit HandStartedJob(int world_size)
      : world_size_(world_size), port_(unused_port()), identity_(new_job_identity()) {}

  std::unique_ptr<Subprocess> start(int rank, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& extra_env = {}) const {
    std::vector<std::string> env = {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world_size_),
                                    "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port_),
                                    std::string(kRunIdVariable) + "=" + identity_.run_id,
                                    std::string(kStoreTokenVariable) + "=" + identity_.token};
    // An extra NAME=value replaces the job's own NAME (a rank told another WORLD_SIZE).
    for (const std::string& extra : extra_env) {
      const std::string name = extra.substr(0, extra.find('=') + 1);
      auto same = std::find_if(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(name, 0) == 0; });
      if (same != env.end()) {
        *same = extra;
      } else {
        env.push_back(extra);
      }
    }
    return std::make_unique<Subprocess>(argv, env, /*merge_stderr=*/true);
  }

 private:
  const int world_size_;
  const int port_;
  const JobIdentity identity_;
};

}  // namespace testing
}  // namespace distcomm
