// The order in which the nccl backend issues an op (op_issue.h), with CPU stand-ins for
// the communicator (its issue lock and its stream, as a list of what was put on it) and
// the op's Work: an op its checks refuse never reaches a communicator (a group's would be
// numbered, and the ranks' numbers would part), and no other thread's op comes between an
// op and its end marker.
#include "backends/nccl/op_issue.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <thread>

#include "api/errors.h"
#include "tests/backends/nccl/fake_device.h"

namespace distcomm {
namespace nccl {
namespace testing {
namespace {

using namespace std::chrono_literals;

// A communicator whose stream is a list of entries ("op 1", "end 1").
class StreamComm : public FakeComm {
 public:
  std::unique_lock<std::recursive_mutex> lock_issue() { return std::unique_lock<std::recursive_mutex>(issue_mu_); }
  void put(const std::string& entry) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stream_.push_back(entry);
    }
    changed_.notify_all();
  }
  // Waits until `entry` is on the stream, for at most `limit`.
  bool wait_for_entry(const std::string& entry, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, limit, [&] { return std::find(stream_.begin(), stream_.end(), entry) != stream_.end(); });
  }
  std::vector<std::string> stream() {
    std::lock_guard<std::mutex> lock(mu_);
    return stream_;
  }

 private:
  std::recursive_mutex issue_mu_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> stream_;
};

class OpIssueTest : public ::testing::Test {
 protected:
  OpIssue<StreamComm, FakeWork> op(const std::string& name) {
    OpIssue<StreamComm, FakeWork> s;
    s.failure = failure_.get();
    s.watchdog = &dog_;
    s.timeout = 10000ms;
    s.check = [] {};
    s.comm = [this] {
      ++comms_asked_;
      return comm_;
    };
    s.work = [name](const std::shared_ptr<StreamComm>& c) { return std::make_shared<FakeWork>(name, c); };
    s.issue = [name](StreamComm& c, FakeWork& w) {
      c.put("op " + name);
      c.put("end " + name);
      w.marker = TrackedWork::Marker::kPassed;
    };
    return s;
  }

  std::shared_ptr<GroupFailure> failure_ = std::make_shared<GroupFailure>(0, nullptr);
  Watchdog dog_{failure_, 200us};
  std::shared_ptr<StreamComm> comm_ = std::make_shared<StreamComm>();
  std::atomic<int> comms_asked_{0};
};

TEST_F(OpIssueTest, AnOpItsChecksRefuseNeverReachesACommunicator) {
  auto refused = op("all_reduce #0");
  refused.check = [] { throw InvalidArgument("nccl backend: all_reduce on cuda:0 was given a CUDA stream of cuda:1"); };
  EXPECT_THROW(issue_op(refused), InvalidArgument);
  EXPECT_EQ(comms_asked_, 0) << "the communicator (and its number) was taken for an op that was then refused";
  EXPECT_TRUE(comm_->stream().empty());
  EXPECT_FALSE(failure_->failed()) << "nothing was sent: the group goes on";
  EXPECT_EQ(dog_.in_flight(), 0u);

  auto next = issue_op(op("all_reduce #1"));
  EXPECT_EQ(comms_asked_, 1);
  ASSERT_TRUE(eventually([&] { return next->is_completed(); }));
  EXPECT_TRUE(next->is_success());
}

// Thread A enqueues its op, then gives thread B every chance to enqueue its own before A
// records its end: B must not get in.
TEST_F(OpIssueTest, NoOtherThreadsOpComesBetweenAnOpAndItsEndMarker) {
  auto a = op("a");
  a.issue = [this](StreamComm& c, FakeWork& w) {
    c.put("op a");
    c.wait_for_entry("op b", 300ms);  // B is issuing meanwhile (it has asked for the communicator)
    c.put("end a");
    w.marker = TrackedWork::Marker::kPassed;
  };
  std::shared_ptr<FakeWork> wa, wb;
  std::thread ta([&] { wa = issue_op(a); });
  ASSERT_TRUE(comm_->wait_for_entry("op a", 5000ms));
  std::thread tb([&] { wb = issue_op(op("b")); });
  ta.join();
  tb.join();
  EXPECT_EQ(comm_->stream(), (std::vector<std::string>{"op a", "end a", "op b", "end b"}));
  ASSERT_TRUE(eventually([&] { return wa->is_completed() && wb->is_completed(); }));
}

TEST_F(OpIssueTest, AFailureWhileIssuingFailsTheWorkAndTheGroup) {
  auto broken = op("all_reduce #2");
  broken.issue = [](StreamComm& c, FakeWork&) {
    c.put("op all_reduce #2");
    throw Timeout("all_reduce #2: NCCL did not take the op before its timeout");
  };
  auto w = issue_op(broken);
  ASSERT_TRUE(w->is_completed());
  EXPECT_NE(message_of<Timeout>(w->exception()).find("NCCL did not take the op"), std::string::npos);
  EXPECT_TRUE(failure_->failed());
  EXPECT_EQ(comm_->aborts, 1);
  EXPECT_EQ(dog_.in_flight(), 0u);
  EXPECT_THROW(issue_op(op("all_reduce #3")), Timeout) << "the group refuses later ops";
}

}  // namespace
}  // namespace testing
}  // namespace nccl
}  // namespace distcomm
