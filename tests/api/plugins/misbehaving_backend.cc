// A test-only plugin whose all_reduce misbehaves as its tensor's first element asks, so
// that tests can check what the core guarantees whatever a backend does
// (tests/api/backend_misbehaviour_test.cc). A group of one rank; every other op is a
// local no-op that ends at once.
//   0: ends the op    1: returns a null Work      2: returns a Work it never ends
//   3: throws std::runtime_error    4: throws an int    5: throws InvalidArgument
//   6: ends the op with PeerFailure
#include "api/errors.h"
#include "api/plugin/plugin.h"

namespace {

using namespace distcomm;

class MisbehavingBackend : public Backend {
 public:
  explicit MisbehavingBackend(BackendOptions o) : Backend(std::move(o)) {}
  std::string name() const override { return "misbehaving"; }
  std::vector<OpType> supported_ops() const override {
    return {OpType::kAllReduce, OpType::kBroadcast, OpType::kBarrier};
  }
  WorkPtr all_reduce(Tensor& t, const AllReduceOptions&, const OpContext& c) override {
    const int how = t.numel() > 0 ? static_cast<int>(static_cast<const float*>(t.data())[0]) : 0;
    auto w = std::make_shared<Work>(OpType::kAllReduce, c.seq, c.description);
    switch (how) {
      case 1: return nullptr;
      case 2: return w;
      case 3: throw std::runtime_error("all_reduce exploded");
      case 4: throw 7;
      case 5: throw InvalidArgument("misbehaving refuses this tensor");
      case 6: w->finish(std::make_exception_ptr(PeerFailure("misbehaving: link down"))); return w;
      default: w->finish(); return w;
    }
  }
  WorkPtr broadcast(Tensor&, const BroadcastOptions&, const OpContext& c) override { return done(OpType::kBroadcast, c); }
  WorkPtr barrier(const BarrierOptions&, const OpContext& c) override { return done(OpType::kBarrier, c); }

 private:
  static WorkPtr done(OpType op, const OpContext& c) {
    auto w = std::make_shared<Work>(op, c.seq, c.description);
    w->finish();
    return w;
  }
};

int available(std::string*) { return 1; }

Backend* create(const BackendOptions& o) { return new MisbehavingBackend(o); }

}  // namespace

DISTCOMM_DEFINE_PLUGIN("misbehaving", "misbehaving test plugin 1.0", DISTCOMM_DEVICE_CPU, 0, available, create)
