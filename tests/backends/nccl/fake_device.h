// CPU stand-ins for what the nccl backend's host logic sees of the GPU: a communicator the
// watchdog can question and abort, an op it polls, and a Work whose end marker (a CUDA
// event in the real backend) the test moves. The real ones need a GPU; the rules about
// deadlines, fault order and completion do not.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "api/errors.h"
#include "backends/nccl/tracked_work.h"
#include "backends/nccl/watchdog.h"

namespace distcomm {
namespace nccl {
namespace testing {

class FakeComm : public WatchedComm {
 public:
  explicit FakeComm(std::string label = "communicator #0 of group 'world' on cuda:0") : label_(std::move(label)) {}
  std::exception_ptr async_error() override {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  void abort(const std::string& reason) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (reason_.empty()) reason_ = reason;
    }
    ++aborts;
    if (on_abort) on_abort();  // what aborting does on the device (kernels exit)
  }
  std::string abort_reason() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }
  std::string label() const override { return label_; }

  // NCCL blames a peer (ncclRemoteError), as most tests want.
  void set_error(const std::string& e) { set_error(std::make_exception_ptr(PeerFailure(e))); }
  void set_error(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = e;
  }
  std::atomic<int> aborts{0};
  std::function<void()> on_abort;  // set before the comm is shared with the watchdog

 private:
  const std::string label_;
  mutable std::mutex mu_;
  std::exception_ptr error_;
  std::string reason_;
};

// An op that ends when the test says so (as an event passes on the GPU).
class FakeOp : public TrackedOp {
 public:
  // done_with: a flag shared by several ops, so that they end at the same moment.
  explicit FakeOp(std::string label, std::shared_ptr<std::atomic<bool>> done_with = nullptr)
      : label_(std::move(label)), done_with_(std::move(done_with)) {}
  Poll poll(std::exception_ptr* error) override {
    if (failed_) {
      if (error) *error = std::make_exception_ptr(Error(label_ + ": cudaEventQuery: an illegal memory access was encountered"));
      return Poll::kFailed;
    }
    return done_ || (done_with_ && *done_with_) ? Poll::kDone : Poll::kRunning;
  }
  void complete(std::exception_ptr error) override {
    if (on_complete) on_complete();
    std::lock_guard<std::mutex> lock(mu_);
    ++completions_;
    if (completions_ == 1) error_ = error;
  }
  std::string label() const override { return label_; }

  void set_done() { done_ = true; }
  void set_failed() { failed_ = true; }
  int completions() {
    std::lock_guard<std::mutex> lock(mu_);
    return completions_;
  }
  std::exception_ptr error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  std::function<void()> on_complete;  // set before the op is tracked

 private:
  const std::string label_;
  const std::shared_ptr<std::atomic<bool>> done_with_;
  std::atomic<bool> done_{false};
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  int completions_ = 0;
  std::exception_ptr error_;
};

// Stand-ins for cudaStream_t values: compared, never dereferenced.
inline CUstream_st* fake_stream(uintptr_t n) { return reinterpret_cast<CUstream_st*>(n); }

// A TrackedWork whose end marker the test sets.
class FakeWork : public TrackedWork {
 public:
  FakeWork(std::string label, std::shared_ptr<WatchedComm> comm, bool blocking_wait = false,
           CUstream_st* issue_stream = fake_stream(0x100))
      : TrackedWork(OpType::kAllReduce, context(), std::move(label), std::move(comm), issue_stream, blocking_wait,
                    {}) {}
  std::atomic<Marker> marker{Marker::kPending};
  std::atomic<int> device_waits{0};
  std::atomic<CUstream_st*> last_held{nullptr};  // the stream the last device wait held

 protected:
  Marker query_marker(std::string* error) const override {
    const Marker m = marker;
    if (m == Marker::kError && error) *error = "an illegal memory access was encountered";
    return m;
  }
  void wait_on_device(CUstream_st* stream) override {
    last_held = stream;
    ++device_waits;
  }

 private:
  static OpContext context() {
    OpContext ctx;
    ctx.seq = 7;
    return ctx;
  }
};

// Polls until cond() holds or `limit` passes.
template <typename Cond>
bool eventually(Cond cond, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return cond();
}

// The message of e if it is an E, else a line saying what it was.
template <typename E>
std::string message_of(std::exception_ptr e) {
  if (!e) return "no error";
  try {
    std::rethrow_exception(e);
  } catch (const E& x) {
    return x.what();
  } catch (const std::exception& x) {
    return std::string("wrong exception type: ") + x.what();
  }
  return "";
}

}  // namespace testing
}  // namespace nccl
}  // namespace distcomm
