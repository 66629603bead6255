// Skips that CI can refuse. A test that cannot run without something this machine may
// lack (a GPU, Open MPI, network namespaces) skips with DISTCOMM_SKIP_WITHOUT(what) and its
// reason; where DISTCOMM_REQUIRE (comma-separated, e.g. "gloo,mpi,netns") lists `what`,
// the same line fails the test instead, so a machine that should run everything cannot
// pass by skipping. Shell tests do the same with skip.sh's skip_test.
//
//   if (!why.empty()) DISTCOMM_SKIP_WITHOUT("cuda") << why;
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace distcomm {
namespace testing {

// Whether DISTCOMM_REQUIRE lists what.
bool required(const std::string& what);

// The heading of a skip for want of `what` (or of the failure that replaces it).
std::string skip_heading(const std::string& what);

}  // namespace testing
}  // namespace distcomm

// A skip, or a fatal failure where DISTCOMM_REQUIRE lists `what`; stream the reason into it.
// Returns from the calling function, as GTEST_SKIP() does.
#define DISTCOMM_SKIP_WITHOUT(what)                                                                    \
  return GTEST_MESSAGE_(::distcomm::testing::skip_heading(what).c_str(),                             \
                        ::distcomm::testing::required(what) ? ::testing::TestPartResult::kFatalFailure \
                                                            : ::testing::TestPartResult::kSkip)
