// A test-only plugin whose shutdown() lets some ops in flight end, as the nccl backend's
// does (the GPU finishes what a returned wait() left on a stream): a group of one rank
// where all_reduce and barrier return Works left open. shutdown() finishes every open
// all_reduce successfully (drained) and fails every open barrier (cut off), so a test can
// tell the ops a group's destruction really cut off from those its shutdown let end.
#include <mutex>
#include <vector>

#include "api/errors.h"
#include "api/plugin/plugin.h"

namespace {

using namespace distcomm;

std::exception_ptr cut_off(const char* why) { return std::make_exception_ptr(PeerFailure(why)); }

class DrainAtShutdownBackend : public Backend {
 public:
  explicit DrainAtShutdownBackend(BackendOptions o) : Backend(std::move(o)) {
    if (size() != 1) throw InvalidArgument("drain_at_shutdown backend serves groups of one rank only");
  }
  // Nothing is left pending forever, whatever the core called before.
  ~DrainAtShutdownBackend() override {
    const std::exception_ptr gone = cut_off("backend destroyed");
    end_all(gone, gone);
  }

  std::string name() const override { return "drain_at_shutdown"; }
  std::vector<OpType> supported_ops() const override { return {OpType::kAllReduce, OpType::kBarrier}; }

  WorkPtr all_reduce(Tensor&, const AllReduceOptions&, const OpContext& c) override {
    return kept(all_reduces_, OpType::kAllReduce, c);
  }
  WorkPtr barrier(const BarrierOptions&, const OpContext& c) override {
    return kept(barriers_, OpType::kBarrier, c);
  }

  // all_reduces drain (end well), barriers are cut off.
  void shutdown() override { end_all(nullptr, cut_off("cut off by shutdown")); }
  // Nothing in flight gets time to end.
  void abort() override {
    const std::exception_ptr aborted = cut_off("cut off by abort");
    end_all(aborted, aborted);
  }

 private:
  WorkPtr kept(std::vector<WorkPtr>& into, OpType op, const OpContext& c) {
    auto w = std::make_shared<Work>(op, c.seq, c.description);
    std::lock_guard<std::mutex> lock(mu_);
    into.push_back(w);
    return w;
  }
  void end_all(std::exception_ptr all_reduce_error, std::exception_ptr barrier_error) {
    std::vector<WorkPtr> all_reduces, barriers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all_reduces.swap(all_reduces_);
      barriers.swap(barriers_);
    }
    // Outside the lock: finish() runs the Works' callbacks (the core's recorder) here.
    for (const WorkPtr& w : all_reduces) w->finish(all_reduce_error);
    for (const WorkPtr& w : barriers) w->finish(barrier_error);
  }

  std::mutex mu_;
  std::vector<WorkPtr> all_reduces_;
  std::vector<WorkPtr> barriers_;
};

int available(std::string*) { return 1; }

Backend* create(const BackendOptions& o) { return new DrainAtShutdownBackend(o); }

}  // namespace

DISTCOMM_DEFINE_PLUGIN("drain_at_shutdown", "drain_at_shutdown test plugin 1.0", DISTCOMM_DEVICE_CPU, 0, available,
                       create)
