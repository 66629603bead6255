// A receive that times out while this rank holds messages no receive took (shm sets them
// aside, shm_p2p.h) names them: "this rank holds 1 message no receive has taken: from rank 1
// (tag 0, 8 bytes)". The peers' reports only said that the awaited rank has no transfer with
// this one pending, which is true but hides the likely cause: an earlier receive (here a
// recv_any_source) took the message the waiting receive was meant to get.
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "api/process_group.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTimeout{2000};
// Senders stay in the group until rank 0's receive has timed out: a rank that closed the
// group fails that receive at once, as closed, not as a Timeout.
constexpr std::chrono::seconds kSendersStay{6};

// Rank 2 sends one int64 on tag 0; rank 0 takes it with recv_any_source, then lets rank 1 send
// `from_rank1` int64 messages (tags 0, 1, ...), which no receive takes, and waits for a
// second message from rank 2 that never comes. `check` gets rank 0's error, in rank 0's
// process (a failed expectation there fails the test).
void run_case(int from_rank1, const std::function<void(const std::string&)>& check) {
  testing::GroupHarnessOptions o;
  o.op_timeout = kTimeout;
  testing::run_group(
      3, "shm",
      [&](ProcessGroup& pg) {
        Tensor one = Tensor::zeros({1}, DType::kInt64);
        Tensor go = Tensor::zeros({1}, DType::kInt8);
        if (pg.rank() == 0) {
          pg.recv_any_source(one)->wait();  // rank 2's: rank 1 has not sent yet
          pg.send(go, 1, P2POptions{.tag = 9})->wait();
          std::string error = "(no error)";
          try {
            pg.recv(one, 2)->wait();
          } catch (const std::exception& e) {
            error = e.what();
          }
          check(error);
        } else if (pg.rank() == 1) {
          pg.recv(go, 0, P2POptions{.tag = 9})->wait();
          for (int tag = 0; tag < from_rank1; ++tag) pg.send(one, 0, P2POptions{.tag = tag})->wait();
          std::this_thread::sleep_for(kSendersStay);
        } else {
          pg.send(one, 0)->wait();
          std::this_thread::sleep_for(kSendersStay);
        }
      },
      o);
}

TEST(ShmHeldMessages, ATimedOutReceiveNamesTheMessageItHolds) {
  run_case(1, [](const std::string& error) {
    EXPECT_NE(error.find("receive from rank 2 (tag 0, 8 bytes) did not finish within 2000 ms; this rank holds 1 "
                         "message no receive has taken: from rank 1 (tag 0, 8 bytes) (one has this receive's tag"),
              std::string::npos)
        << error;
  });
}

TEST(ShmHeldMessages, ManyHeldMessagesNameTheFirstFewAndCountTheRest) {
  run_case(5, [](const std::string& error) {
    EXPECT_NE(error.find("this rank holds 5 messages no receive has taken: from rank 1 (tag 0, 8 bytes), from rank 1 "
                         "(tag 1, 8 bytes), from rank 1 (tag 2, 8 bytes), from rank 1 (tag 3, 8 bytes), and 1 more"),
              std::string::npos)
        << error;
  });
}

}  // namespace
}  // namespace distcomm
