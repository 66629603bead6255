// The stall watch's "has waited" lines of a receive that waits while this rank holds
// messages no receive took name those messages, as the receive's Timeout does
// (shm_held_messages_test): those lines come one report interval into the wait (60 s by
// default, DISTCOMM_STALL_REPORT_SECONDS), long before the Timeout (30 minutes by default),
// and are what a user looking at a hung job reads first. They said only where the other
// ranks were ("rank 2 has no transfer with this rank pending"), which hides the likely cause:
// an earlier receive (here a recv_any_source) took the message the waiting one was meant to
// get. shm notes it on the waiting receive's Work (api/diagnostics/work_wait_note.h) once the
// receive has waited a second.
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/process_group.h"
#include "tests/testing/captured_stderr.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

// "has waited" lines at 2 s and 4 s into the receive's wait (the interval, then each time
// the wait has doubled), its Timeout at 6 s. shm notes the held message at 1 s: a second of
// margin before the first line, three before the second.
constexpr char kReportSeconds[] = "2";
constexpr milliseconds kTimeout{6000};
// Senders stay in the group until rank 0's receive has ended (a rank that closed the group
// fails that receive at once, as closed, not as a Timeout), which rank 0 says by a file.
constexpr std::chrono::seconds kSendersStayAtMost{60};

constexpr char kHeld[] =
    "this rank holds 1 message no receive has taken: from rank 1 (tag 0, 8 bytes) (one has this receive's tag";

// Waits until `path` exists, or `limit` has passed.
void wait_for_file(const std::string& path, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!std::ifstream(path).good() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(20));
  }
}

// The lines of `text` that contain `what`.
std::string lines_with(const std::string& text, const std::string& what) {
  std::istringstream in(text);
  std::string line, found;
  while (std::getline(in, line)) {
    if (line.find(what) != std::string::npos) found += line + "\n";
  }
  return found;
}

// Rank 2 sends one int64 on tag 0; rank 0 takes it with recv_any_source, then lets rank 1 send
// one int64 on tag 0, which no receive takes, and waits for a second message from rank 2
// that never comes (as in shm_held_messages_test).
TEST(ShmHeldMessagesProgress, TheHasWaitedLinesNameTheMessagesThisRankHolds) {
  ::setenv("DISTCOMM_STALL_REPORT_SECONDS", kReportSeconds, 1);  // read by each rank's stall watch
  testing::GroupHarnessOptions o;
  o.op_timeout = kTimeout;
  const std::string dir = testing::make_temp_dir();
  const std::string ended = dir + "/receive_ended";
  testing::run_group(
      3, "shm",
      [&](ProcessGroup& pg) {
        Tensor one = Tensor::zeros({1}, DType::kInt64);
        Tensor go = Tensor::zeros({1}, DType::kInt8);
        if (pg.rank() == 0) {
          pg.recv_any_source(one)->wait();  // rank 2's: rank 1 has not sent yet
          pg.send(go, 1, P2POptions{.tag = 9})->wait();
          std::string error = "(no error)";
          testing::CapturedStderr err;
          try {
            pg.recv(one, 2)->wait();
          } catch (const std::exception& e) {
            error = e.what();
          }
          const std::string logged = err.text();
          std::ofstream(ended) << "ended\n";
          std::fprintf(stderr, "rank 0 logged:\n%s", logged.c_str());
          // The receive waited to its Timeout: every line about it came while it waited.
          ASSERT_NE(error.find("did not finish within 6000 ms"), std::string::npos) << error;
          const std::string waited = lines_with(logged, " has waited ");
          ASSERT_FALSE(waited.empty()) << "no has-waited line: " << logged;
          EXPECT_NE(lines_with(waited, kHeld).find(" has waited "), std::string::npos)
              << "no has-waited line names the held message: " << waited;
        } else if (pg.rank() == 1) {
          pg.recv(go, 0, P2POptions{.tag = 9})->wait();
          pg.send(one, 0, P2POptions{.tag = 0})->wait();
          wait_for_file(ended, kSendersStayAtMost);
        } else {
          pg.send(one, 0)->wait();
          wait_for_file(ended, kSendersStayAtMost);
        }
      },
      o);
  testing::remove_temp_dir(dir);
  ::unsetenv("DISTCOMM_STALL_REPORT_SECONDS");
}

}  // namespace
}  // namespace distcomm
