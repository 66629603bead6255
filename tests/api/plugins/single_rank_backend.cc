// A test-only plugin: a real shared object that the loader finds, checks and dlopens.
// Its backend serves a group of one rank, where every collective is a local copy, so
// the core's ProcessGroup (validation, list adapters, AVG fallback, sequence numbers)
// can be tested in one process without any transport.
#include <cstring>

#include "api/errors.h"
#include "api/plugin/plugin.h"

namespace {

using namespace distcomm;

void copy_bytes(Tensor& dst, const Tensor& src) {
  if (src.nbytes() && dst.data() != src.data()) std::memcpy(dst.data(), src.data(), src.nbytes());
}

class SingleRankBackend : public Backend {
 public:
  explicit SingleRankBackend(BackendOptions o) : Backend(std::move(o)) {
    if (size() != 1) throw InvalidArgument("single_rank backend serves groups of one rank only");
  }
  std::string name() const override { return "single_rank"; }
  std::vector<OpType> supported_ops() const override {
    return {OpType::kAllReduce, OpType::kBroadcast, OpType::kReduce,        OpType::kAllGather,
            OpType::kGather,    OpType::kScatter,   OpType::kReduceScatter, OpType::kAllToAll,
            OpType::kBarrier};
  }
  WorkPtr all_reduce(Tensor&, const AllReduceOptions& o, const OpContext& c) override {
    // A SUM/AVG here would be identity; AVG is left to the core's fallback on purpose.
    if (o.op.kind == ReduceOp::AVG) throw InvalidArgument("test plugin got AVG: fallback not applied");
    return done(OpType::kAllReduce, c);
  }
  WorkPtr broadcast(Tensor&, const BroadcastOptions&, const OpContext& c) override {
    return done(OpType::kBroadcast, c);
  }
  WorkPtr reduce(Tensor&, const ReduceOptions&, const OpContext& c) override { return done(OpType::kReduce, c); }
  WorkPtr all_gather(Tensor& out, const Tensor& in, const AllGatherOptions&, const OpContext& c) override {
    copy_bytes(out, in);
    return done(OpType::kAllGather, c);
  }
  WorkPtr gather(Tensor& out, const Tensor& in, const GatherOptions&, const OpContext& c) override {
    copy_bytes(out, in);
    return done(OpType::kGather, c);
  }
  WorkPtr scatter(Tensor& out, const Tensor& in, const ScatterOptions&, const OpContext& c) override {
    copy_bytes(out, in);
    return done(OpType::kScatter, c);
  }
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions&, const OpContext& c) override {
    copy_bytes(out, in);
    return done(OpType::kReduceScatter, c);
  }
  WorkPtr all_to_all(Tensor& out, const Tensor& in, const std::vector<int64_t>&, const std::vector<int64_t>&,
                     const AllToAllOptions&, const OpContext& c) override {
    copy_bytes(out, in);
    return done(OpType::kAllToAll, c);
  }
  WorkPtr barrier(const BarrierOptions&, const OpContext& c) override { return done(OpType::kBarrier, c); }

 private:
  static WorkPtr done(OpType op, const OpContext& c) {
    auto w = std::make_shared<Work>(op, c.seq, c.description);
    w->finish();
    return w;
  }
};

int available(std::string*) { return 1; }

Backend* create(const BackendOptions& o) { return new SingleRankBackend(o); }

}  // namespace

DISTCOMM_DEFINE_PLUGIN("single_rank", "single_rank test plugin 1.0", DISTCOMM_DEVICE_CPU, 0, available, create)
