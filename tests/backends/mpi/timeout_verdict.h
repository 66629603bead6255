// A rank's verdict on a call that must fail with Timeout, for mpirun tests whose wrapper
// reads the ranks' output (mpirun_test.sh --expect-output): prints one line,
// "<who>: <label> failed as it must: ..." or "<who>: FAILED ...", and returns which.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "api/errors.h"

namespace distcomm {
namespace testing {

// Passes when call throws Timeout after min_s to max_s seconds with `expected` in its message.
inline bool expect_timeout(const std::string& who, const std::string& label, const std::function<void()>& call,
                           const std::string& expected, double min_s, double max_s) {
  const auto start = std::chrono::steady_clock::now();
  bool ok = false;
  try {
    call();
    std::printf("%s: FAILED: %s succeeded, expected Timeout\n", who.c_str(), label.c_str());
  } catch (const Timeout& e) {
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string msg = e.what();
    ok = msg.find(expected) != std::string::npos && took >= min_s && took <= max_s;
    std::printf("%s: %s: Timeout after %.2f s: %s\n", who.c_str(),
                ok ? (label + " failed as it must").c_str()
                   : ("FAILED (expected " + std::to_string(min_s) + "-" + std::to_string(max_s) + " s, naming '" +
                      expected + "')")
                         .c_str(),
                took, msg.c_str());
  } catch (const std::exception& e) {
    std::printf("%s: FAILED: %s threw something other than Timeout: %s\n", who.c_str(), label.c_str(), e.what());
  }
  std::fflush(stdout);
  return ok;
}

}  // namespace testing
}  // namespace distcomm
