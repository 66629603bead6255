// FlightRecorder: the ring, the states and their times, the derived start of a collective
// queued behind another; and a real group's ops recorded without the backend's help.
#include "api/diagnostics/flight_recorder.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "api/errors.h"
#include "api/group/process_environment.h"
#include "api/process_group.h"
#include "api/diagnostics/trace_dump.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

OpFingerprint collective(uint64_t seq) {
  OpFingerprint f;
  f.op = OpType::kAllReduce;
  f.seq = seq;
  return f;
}

WorkPtr work(uint64_t seq) { return std::make_shared<Work>(OpType::kAllReduce, seq); }

TEST(FlightRecorder, RingKeepsTheLastOpsAndCountsTheDropped) {
  auto rec = std::make_shared<FlightRecorder>(3);
  for (uint64_t i = 0; i < 5; ++i) {
    WorkPtr w = work(i);
    rec->watch(rec->queued(collective(i)), w);
    w->finish();
  }
  uint64_t dropped = 0;
  const auto ops = rec->snapshot(&dropped);
  EXPECT_EQ(dropped, 2u);
  ASSERT_EQ(ops.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ops[i].fingerprint.seq, i + 2);
    EXPECT_EQ(ops[i].state, TraceEntry::State::kCompleted);
    EXPECT_GE(ops[i].ended_ns, ops[i].started_ns);
    EXPECT_GE(ops[i].started_ns, ops[i].queued_ns);
  }
}

TEST(FlightRecorder, ACollectiveStartsWhenTheOneBeforeItEnds) {
  auto rec = std::make_shared<FlightRecorder>(8);
  WorkPtr first = work(0), second = work(1);
  rec->watch(rec->queued(collective(0)), first);
  rec->watch(rec->queued(collective(1)), second);
  auto ops = rec->snapshot();
  EXPECT_EQ(ops[0].state, TraceEntry::State::kStarted);
  EXPECT_EQ(ops[1].state, TraceEntry::State::kQueued);
  EXPECT_EQ(ops[1].started_ns, 0);
  first->finish();
  ops = rec->snapshot();
  EXPECT_EQ(ops[0].state, TraceEntry::State::kCompleted);
  EXPECT_EQ(ops[1].state, TraceEntry::State::kStarted);
  EXPECT_EQ(ops[1].started_ns, ops[0].ended_ns);
  // Point to point progresses beside the collectives: started when issued.
  OpFingerprint send;
  send.op = OpType::kSend;
  send.p2p = true;
  rec->queued(send);
  EXPECT_EQ(rec->snapshot().back().state, TraceEntry::State::kStarted);
}

TEST(FlightRecorder, AFailedOpKeepsItsErrorAndAnIssueRefusalIsRecorded) {
  auto rec = std::make_shared<FlightRecorder>(8);
  WorkPtr w = work(0);
  rec->watch(rec->queued(collective(0)), w);
  w->finish(std::make_exception_ptr(Timeout("rank 0/3 group 'world' all_reduce #0: not finished")));
  const uint64_t refused = rec->queued(collective(1));
  rec->failed_to_issue(refused, std::make_exception_ptr(PeerFailure("the group is unusable")));
  const auto ops = rec->snapshot();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].state, TraceEntry::State::kFailed);
  EXPECT_NE(ops[0].error.find("distcomm::Timeout: rank 0/3 group 'world' all_reduce #0"), std::string::npos)
      << ops[0].error;
  EXPECT_EQ(ops[1].state, TraceEntry::State::kFailed);
  EXPECT_NE(ops[1].error.find("PeerFailure"), std::string::npos) << ops[1].error;
}

// An op that has ended before it is watched (within its backend's call: the recorder then
// records it at once, without a callback) is recorded as one that ends later: its state,
// its error, the group's failure note, and the start of the collective queued behind it.
TEST(FlightRecorder, AnOpThatEndedBeforeItIsWatchedIsRecordedAlike) {
  auto rec = std::make_shared<FlightRecorder>(8);
  int notes = 0;
  rec->set_failure_note([&](const std::exception_ptr& e) { notes += e ? 1 : 100; });
  WorkPtr ok = work(0), failed = work(1), later = work(2);
  const uint64_t ok_id = rec->queued(collective(0));
  const uint64_t failed_id = rec->queued(collective(1));
  const uint64_t later_id = rec->queued(collective(2));
  EXPECT_EQ(rec->snapshot()[1].state, TraceEntry::State::kQueued);
  ok->finish();
  rec->watch(ok_id, ok);
  auto ops = rec->snapshot();
  EXPECT_EQ(ops[0].state, TraceEntry::State::kCompleted);
  EXPECT_EQ(ops[1].state, TraceEntry::State::kStarted) << "the collective behind an ended one starts";
  EXPECT_EQ(ops[1].started_ns, ops[0].ended_ns);
  EXPECT_EQ(notes, 0);
  failed->finish(std::make_exception_ptr(Timeout("rank 0/3 group 'world' all_reduce #1: not finished")));
  rec->watch(failed_id, failed);
  rec->watch(later_id, later);  // still running: ended by its finish below
  ops = rec->snapshot();
  EXPECT_EQ(ops[1].state, TraceEntry::State::kFailed);
  EXPECT_NE(ops[1].error.find("distcomm::Timeout: rank 0/3 group 'world' all_reduce #1"), std::string::npos)
      << ops[1].error;
  EXPECT_EQ(notes, 1) << "the failure note is told of the failed op once";
  EXPECT_EQ(ops[2].state, TraceEntry::State::kStarted);
  later->finish();
  EXPECT_EQ(rec->snapshot()[2].state, TraceEntry::State::kCompleted);
  EXPECT_EQ(notes, 1);
}

TEST(FlightRecorder, BufferSizeFromTheEnvironment) {
  ::unsetenv("DISTCOMM_TRACE_BUFFER");
  EXPECT_EQ(TraceSettings::from_environment().buffer, FlightRecorder::kDefaultCapacity);
  ::setenv("DISTCOMM_TRACE_BUFFER", "0", 1);
  EXPECT_EQ(TraceSettings::from_environment().buffer, 0u);
  ::setenv("DISTCOMM_TRACE_BUFFER", "12x", 1);
  try {
    TraceSettings::from_environment();
    ADD_FAILURE() << "12x was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("DISTCOMM_TRACE_BUFFER='12x'"), std::string::npos) << e.what();
  }
  ::unsetenv("DISTCOMM_TRACE_BUFFER");
}

TEST(FlightRecorder, AGroupRecordsEveryOpOfItsBackend) {
  testing::run_group(2, "gloo", [](ProcessGroup& pg) {
    ASSERT_TRUE(pg.recorder());
    Tensor t = Tensor::zeros({10});
    pg.all_reduce(t)->wait();
    pg.broadcast(t, {.root = 1})->wait();
    Tensor p = Tensor::zeros({4}, DType::kInt64);
    if (pg.rank() == 0) pg.send(p, 1)->wait();
    else pg.recv(p, 0)->wait();
    const auto ops = pg.recorder()->snapshot();
    ASSERT_EQ(ops.size(), 3u);
    EXPECT_EQ(ops[0].fingerprint.describe(), "all_reduce #0 float32[10] sum");
    EXPECT_EQ(ops[1].fingerprint.op, OpType::kBroadcast);
    EXPECT_EQ(ops[1].fingerprint.root, 1);
    EXPECT_EQ(ops[2].fingerprint.op, pg.rank() == 0 ? OpType::kSend : OpType::kRecv);
    for (const auto& e : ops) EXPECT_EQ(e.state, TraceEntry::State::kCompleted) << e.fingerprint.describe();
    const std::string dump = trace_dump_json("test");
    EXPECT_NE(dump.find("\"rank\":" + std::to_string(pg.rank())), std::string::npos) << dump;
    EXPECT_NE(dump.find("\"name\":\"world\""), std::string::npos) << dump;
    EXPECT_NE(dump.find("\"versions\":[\"cpu: gloo ("), std::string::npos) << dump;
  });
}

TEST(FlightRecorder, ZeroTurnsItOff) {
  ::setenv("DISTCOMM_TRACE_BUFFER", "0", 1);
  testing::run_group(1, "gloo", [](ProcessGroup& pg) { EXPECT_FALSE(pg.recorder()); });
  ::unsetenv("DISTCOMM_TRACE_BUFFER");
}

}  // namespace
}  // namespace distcomm
