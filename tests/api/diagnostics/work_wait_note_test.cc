// A backend's note on a pending op's wait (api/diagnostics/work_wait_note.h): kept beside the
// Work until the op ends or the Work is destroyed, replaced and cleared by the backend, and
// appended by the stall watch to the op's "has waited" lines (stall_watch_lines.h).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/stall_watch.h"
#include "api/diagnostics/stall_watch_lines.h"
#include "api/diagnostics/work_marks.h"
#include "api/diagnostics/work_wait_note.h"
#include "api/store/hash_store.h"
#include "api/work.h"
#include "tests/testing/captured_stderr.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<Work> recv_work() { return std::make_unique<Work>(OpType::kRecv, 0, "recv p2p#0"); }

TEST(WorkWaitNote, ANoteLastsUntilTheOpEndsAndTheBackendMayReplaceOrClearIt) {
  auto work = recv_work();
  EXPECT_EQ(wait_note_of(work.get()), "");
  note_wait(*work, "this rank holds 1 message");
  EXPECT_EQ(wait_note_of(work.get()), "this rank holds 1 message");
  note_wait(*work, "this rank holds 2 messages");
  EXPECT_EQ(wait_note_of(work.get()), "this rank holds 2 messages");
  note_wait(*work, "");
  EXPECT_EQ(wait_note_of(work.get()), "");
  distcomm_work_wait_note(work.get(), "again");
  EXPECT_EQ(wait_note_of(work.get()), "again");
  distcomm_work_wait_note(work.get(), nullptr);  // null clears too
  EXPECT_EQ(wait_note_of(work.get()), "");
  note_wait(*work, "last");
  work->finish(nullptr);
  EXPECT_EQ(wait_note_of(work.get()), "");
}

TEST(WorkWaitNote, ANoteOnAnEndedOpIsForgottenAtOnce) {
  auto work = recv_work();
  work->finish(nullptr);
  note_wait(*work, "too late");
  EXPECT_EQ(wait_note_of(work.get()), "");
}

TEST(WorkWaitNote, AWorkDestroyedWithoutEndingTakesItsNoteAlong) {
  auto work = recv_work();
  const Work* address = work.get();
  note_wait(*work, "held");
  work.reset();  // never finished
  // Only the address is looked up (never dereferenced): a later Work there would read it.
  EXPECT_EQ(wait_note_of(address), "");
}

TEST(LongWaitLine, TheNoteComesAfterWhereTheOthersAre) {
  const milliseconds waited(60000), timeout(1800000);
  const std::string held = "this rank holds 1 message";
  EXPECT_EQ(internal::long_wait_line("recv p2p#1", waited, timeout, {"rank 2 waits", "", held}),
            "distcomm: recv p2p#1 has waited 60.0 s of its timeout of 1800.0 s: rank 2 waits; " + held);
  EXPECT_EQ(internal::long_wait_line("recv p2p#1", waited, milliseconds(0), {"", "", held}),
            "distcomm: recv p2p#1 has waited 60.0 s: " + held);
  const std::string map = "group 'g' ranks [1] are world ranks [3]";
  EXPECT_EQ(internal::long_wait_line("op", waited, timeout, {"rank 1 waits", map, ""}),
            "distcomm: op has waited 60.0 s of its timeout of 1800.0 s: rank 1 waits; " + map);
  EXPECT_EQ(internal::long_wait_line("op", waited, timeout, {}),
            "distcomm: op has waited 60.0 s of its timeout of 1800.0 s");
}

// The note a backend set on the op the watch reports on ends its "has waited" line.
TEST(StallWatchReport, TheHasWaitedLineEndsWithTheBackendsNote) {
  ::setenv("DISTCOMM_STALL_REPORT_SECONDS", "0.3", 1);  // read by the watch's constructor
  std::string text;
  {
    testing::CapturedStderr err;  // read while it lasts: waits for a line, not a guessed time
    StorePtr store = std::make_shared<HashStore>();
    GroupFailure failure{0, store};
    StallWatchOptions o;
    o.rank = 0;
    o.size = 2;  // rank 1 never reports
    o.board = store;
    o.tick = milliseconds(100);
    StallWatch watch(o, failure);
    // A collective: the note is the backend's, whatever the op (shm sets it on receives).
    WorkPtr waiting = std::make_shared<Work>(OpType::kAllReduce, 0, "rank 0/2 group 'world' all_reduce #0");
    OpFingerprint f;
    f.op = OpType::kAllReduce;
    watch.issued(f, waiting, milliseconds(600000));
    note_wait(*waiting, "this rank holds 1 message no receive has taken: from rank 1 (tag 0, 8 bytes)");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (text.find(" has waited ") == std::string::npos && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(20));
      text = err.so_far();
    }
    waiting->finish();
    watch.stop();
  }
  ::unsetenv("DISTCOMM_STALL_REPORT_SECONDS");
  const size_t at = text.find(" has waited ");
  ASSERT_NE(at, std::string::npos) << "no has-waited line within 30 s: " << text;
  const std::string line = text.substr(at, text.find('\n', at) - at);
  EXPECT_NE(line.find("rank 1 did not report"), std::string::npos) << line;
  const std::string note = "; this rank holds 1 message no receive has taken: from rank 1 (tag 0, 8 bytes)";
  EXPECT_EQ(line.size() >= note.size() ? line.substr(line.size() - note.size()) : line, note) << line;
}

}  // namespace
}  // namespace distcomm
