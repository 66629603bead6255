// Checks for failure tests: an op that must fail with a given error type within a time
// window (never before, never much after), and store handshakes that keep a rank in the
// group until the others are through.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>

#include "api/process_group.h"

namespace distcomm {
namespace testing {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t);

// Runs op, expects it to throw E within [min_s, max_s] seconds, returns the message.
template <typename E>
std::string expect_failure_within(const std::function<void()>& op, double min_s, double max_s, const char* what) {
  const auto start = Clock::now();
  std::string message;
  try {
    op();
    ADD_FAILURE() << what << ": succeeded, expected " << typeid(E).name();
  } catch (const E& e) {
    message = e.what();
    // In the test's log: what a user would read.
    std::fprintf(stderr, "[%s] (%.2f s) %s\n", what, seconds_since(start), message.c_str());
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw the wrong type: " << e.what();
  }
  const double took = seconds_since(start);
  EXPECT_GE(took, min_s) << what << " failed too early: " << message;
  EXPECT_LE(took, max_s) << what << " took too long to fail: " << message;
  return message;
}

// Whether process `pid` (not necessarily a child) has ended within `limit`, as the backends
// see it: its pidfd readable, which comes once every thread of it has exited (its /proc
// state reads "Z" before that). True at once for a pid already reaped.
bool process_ends_within(int pid, std::chrono::milliseconds limit);

// Ranks tell a bystander rank they are done (through the group's store; a group without
// one, mpi's, uses a file store in the test's folder), so it stays alive and in the group
// until then.
void mark_done(ProcessGroup& pg);
void wait_for_done(ProcessGroup& pg, const std::vector<int>& ranks);
// The same through a store of the test's own (one no rank hosts, so that it outlives them).
void mark_done(Store& board, int rank);
void wait_for_done(Store& board, const std::vector<int>& ranks);

}  // namespace testing
}  // namespace distcomm
