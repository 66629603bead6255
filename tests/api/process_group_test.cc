// The ProcessGroup's own logic in one process, over the single_rank test plugin: argument
// validation (before anything reaches a backend), list adapters, the AVG / PREMUL_SUM
// fallback, sequence numbers, backend specs and subgroups. At sizes above one (where AVG
// divides by something, lists hold several tensors, peers exist for send and recv) the
// same logic is tested in process_group_ranks_test, over the in_process plugin.
#include <gtest/gtest.h>

#include "api/errors.h"
#include "api/store/hash_store.h"
#include "api/process_group.h"
#include "tests/api/plugin_test_env.h"

namespace distcomm {
namespace {

class ProcessGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    use_test_plugins();
    pg_ = group_of("single_rank");
  }
  // A world of one over a store of this process.
  static ProcessGroupPtr group_of(const std::string& backend) {
    ProcessGroupOptions o;
    o.store = std::make_shared<HashStore>();
    o.backend = backend;
    return ProcessGroup::create(o);
  }
  std::string error_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no InvalidArgument";
  }
  ProcessGroupPtr pg_;
};

// A group takes its trace settings from its options (init_process_group's one read of the
// environment), and reads the environment only when the program gave none.
TEST_F(ProcessGroupTest, TraceSettingsComeFromTheOptionsWhenGiven) {
  ::unsetenv("DISTCOMM_TRACE_BUFFER");
  ProcessGroupOptions o;
  o.store = std::make_shared<HashStore>();
  o.backend = "single_rank";
  o.environment = ProcessEnvironment::read();
  o.environment->trace.buffer = 0;  // the recorder off, whatever the environment says
  EXPECT_FALSE(ProcessGroup::create(o)->recorder());
  EXPECT_TRUE(pg_->recorder()) << "read from the environment: the default buffer";
}

TEST_F(ProcessGroupTest, Identity) {
  EXPECT_EQ(pg_->rank(), 0);
  EXPECT_EQ(pg_->size(), 1);
  EXPECT_EQ(pg_->name(), "world");
  EXPECT_EQ(pg_->backend_name(), "single_rank");
}

TEST_F(ProcessGroupTest, AverageFallsBackToSumThenDivideOnTheHost) {
  // The test backend refuses AVG, so this passes only if the core rewrote it.
  Tensor t = Tensor::of<float>({2, 4, 6});
  AllReduceOptions o;
  o.op = ReduceOp::AVG;
  pg_->all_reduce(t, o)->wait();
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{2, 4, 6}));  // world of one: avg = identity
}

TEST_F(ProcessGroupTest, PremulSumScalesTheInput) {
  Tensor t = Tensor::of<float>({1, 2, 3});
  AllReduceOptions o;
  o.op = ReduceOp::premul_sum(0.5);
  pg_->all_reduce(t, o)->wait();
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{0.5, 1, 1.5}));
}

TEST_F(ProcessGroupTest, InvalidArgumentsNameOpRankAndArgument) {
  Tensor f = Tensor::of<float>({1, 2});
  const std::string bxor = error_of([&] {
    AllReduceOptions o;
    o.op = ReduceOp::BXOR;
    pg_->all_reduce(f, o);
  });
  EXPECT_NE(bxor.find("rank 0/1 group 'world' all_reduce"), std::string::npos) << bxor;
  EXPECT_NE(bxor.find("bxor"), std::string::npos) << bxor;
  EXPECT_NE(bxor.find("float32"), std::string::npos) << bxor;

  const std::string root = error_of([&] {
    BroadcastOptions o;
    o.root = 3;
    pg_->broadcast(f, o);
  });
  EXPECT_NE(root.find("root 3 is outside the group's ranks [0, 1)"), std::string::npos) << root;

  Tensor out = Tensor::empty({3});
  const std::string count = error_of([&] { pg_->all_gather_into_tensor(out, f); });
  EXPECT_NE(count.find("'output' has 3 elements, expected 2"), std::string::npos) << count;

  std::vector<Tensor> two = {Tensor::empty({2}), Tensor::empty({2})};
  const std::string list = error_of([&] { pg_->all_gather(two, f); });
  EXPECT_NE(list.find("'outputs' has 2 tensors, expected one per rank (1)"), std::string::npos) << list;

  Tensor i32 = Tensor::empty({2}, DType::kInt32);
  std::vector<Tensor> mismatched = {i32};
  const std::string dtype = error_of([&] { pg_->all_gather(mismatched, f); });
  EXPECT_NE(dtype.find("must match in dtype"), std::string::npos) << dtype;

  const std::string undefined = error_of([&] {
    Tensor none;
    pg_->all_reduce(none);
  });
  EXPECT_NE(undefined.find("undefined tensor"), std::string::npos) << undefined;

  const std::string splits = error_of([&] {
    Tensor a = Tensor::empty({4});
    Tensor b = Tensor::empty({4});
    pg_->all_to_all_single(a, b, {3}, {4});
  });
  EXPECT_NE(splits.find("output split sizes add up to 3 rows but the tensor has 4"), std::string::npos) << splits;

  const std::string negative = error_of([&] {
    Tensor a = Tensor::empty({4});
    Tensor b = Tensor::empty({4});
    pg_->all_to_all_single(a, b, {-1}, {4});
  });
  EXPECT_NE(negative.find("output_split_sizes[0] is -1, a negative number of rows"), std::string::npos) << negative;

  const std::string self_block = error_of([&] {
    Tensor out4 = Tensor::empty({4});
    Tensor in3 = Tensor::empty({3});
    pg_->all_to_all_single(out4, in3);
  });
  EXPECT_NE(self_block.find("this rank sends itself 3 elements but expects 4"), std::string::npos) << self_block;
}

TEST_F(ProcessGroupTest, InvalidArgumentDoesNotConsumeASequenceNumber) {
  const uint64_t before = pg_->next_seq();
  Tensor f = Tensor::of<float>({1});
  BroadcastOptions o;
  o.root = -1;
  EXPECT_THROW(pg_->broadcast(f, o), InvalidArgument);
  EXPECT_EQ(pg_->next_seq(), before);
  pg_->broadcast(f)->wait();
  EXPECT_EQ(pg_->next_seq(), before + 1);
}

TEST_F(ProcessGroupTest, ListFormsRoundTripThroughFlatBuffers) {
  Tensor in = Tensor::of<int32_t>({7, 8, 9});
  std::vector<Tensor> outs = {Tensor::zeros({3}, DType::kInt32)};
  pg_->all_gather(outs, in)->wait();
  EXPECT_EQ(outs[0].to_doubles(), (std::vector<double>{7, 8, 9}));

  std::vector<Tensor> gathered = {Tensor::zeros({3}, DType::kInt32)};
  pg_->gather(gathered, in)->wait();
  EXPECT_EQ(gathered[0].to_doubles(), (std::vector<double>{7, 8, 9}));

  Tensor scattered = Tensor::zeros({3}, DType::kInt32);
  pg_->scatter(scattered, {in})->wait();
  EXPECT_EQ(scattered.to_doubles(), (std::vector<double>{7, 8, 9}));

  std::vector<Tensor> a2a_out = {Tensor::zeros({3}, DType::kInt32)};
  std::vector<Tensor> a2a_in = {in};
  pg_->all_to_all(a2a_out, a2a_in)->wait();
  EXPECT_EQ(a2a_out[0].to_doubles(), (std::vector<double>{7, 8, 9}));

  std::vector<Tensor> coalesced = {Tensor::of<float>({1, 2}), Tensor::of<float>({3})};
  pg_->all_reduce_coalesced(coalesced)->wait();
  EXPECT_EQ(coalesced[1].to_doubles(), (std::vector<double>{3}));
}

TEST_F(ProcessGroupTest, BackendSpecParsing) {
  auto spec = BackendSpec::parse("cpu:gloo,cuda:nccl");
  EXPECT_EQ(spec.by_device.at(DeviceType::kCPU), "gloo");
  EXPECT_EQ(spec.by_device.at(DeviceType::kCUDA), "nccl");
  EXPECT_TRUE(BackendSpec::parse("gloo").by_device.empty());
  EXPECT_THROW(BackendSpec::parse("cpu:gloo,cpu:mpi"), InvalidArgument);
  EXPECT_THROW(BackendSpec::parse("tpu:x"), InvalidArgument);
  EXPECT_THROW(BackendSpec::parse("gloo,nccl"), InvalidArgument);
  // Any case, as torch.distributed takes them: the plugins' files are named in lower case.
  EXPECT_EQ(BackendSpec::parse("GLOO").text, "gloo");
  spec = BackendSpec::parse("CPU:Gloo,cuda:NCCL");
  EXPECT_EQ(spec.by_device.at(DeviceType::kCPU), "gloo");
  EXPECT_EQ(spec.by_device.at(DeviceType::kCUDA), "nccl");
  EXPECT_EQ(BackendSpec::parse("Auto").by_device.at(DeviceType::kCPU), "auto");
  // A group made without init_process_group, and its subgroups, take them so too.
  auto pg = group_of("SINGLE_RANK");
  EXPECT_EQ(pg->backend_name(), "single_rank");
  EXPECT_EQ(pg->new_group({0}, "Single_Rank")->backend_name(), "single_rank");
}

// In a mixed group a backend that cannot run here fails only the ops of its device.
TEST_F(ProcessGroupTest, MixedGroupDefersAnUnavailableBackend) {
  auto pg = group_of("cpu:single_rank,cuda:unavailable");
  Tensor cpu = Tensor::of<float>({1});
  pg->all_reduce(cpu)->wait();
  float device_memory[1];
  Tensor cuda = Tensor::from_blob(device_memory, {1}, DType::kFloat32, Device::cuda(0));
  try {
    pg->all_reduce(cuda);
    FAIL() << "expected BackendUnavailable";
  } catch (const BackendUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("no test device"), std::string::npos) << e.what();
  }
}

TEST_F(ProcessGroupTest, AloneAnUnavailableBackendFailsAtCreation) {
  EXPECT_THROW(group_of("unavailable"), BackendUnavailable);
}

TEST_F(ProcessGroupTest, SubgroupsOfOne) {
  auto sub = pg_->new_group({0});
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->name(), "world/g0");
  EXPECT_THROW(pg_->new_group({0, 0}), InvalidArgument);
  EXPECT_THROW(pg_->new_group({1}), InvalidArgument);
  auto none = pg_->split(-1, 0);
  EXPECT_EQ(none, nullptr);
  auto mine = pg_->split(5, 0);
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->size(), 1);
}

// The rule that lets ops be added without breaking built plugins: an op the backend does not
// list in supported_ops() never reaches its virtual (any_size's would say so).
TEST_F(ProcessGroupTest, AnOpTheBackendDoesNotListNeverReachesIt) {
  auto pg = group_of("any_size");
  Tensor t = Tensor::of<float>({1});
  std::vector<Tensor> list = {Tensor::of<float>({1})};
  for (const auto& [what, op] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"barrier", [&] { pg->barrier(); }},
           {"all_reduce", [&] { pg->all_reduce(t); }},
           {"all_reduce", [&] { pg->all_reduce_coalesced(list); }},
       }) {
    try {
      op();
      ADD_FAILURE() << what << " succeeded";
    } catch (const Unsupported& e) {
      EXPECT_EQ(std::string(e.what()), "rank 0/1 group 'world' " + what + ": backend any_size does not support " + what);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << e.what();
    }
  }
  EXPECT_EQ(pg->next_seq(), 0u) << "a refused op takes no sequence number";
}

TEST_F(ProcessGroupTest, AbortFailsLaterOpsFast) {
  pg_->abort();
  Tensor t = Tensor::of<float>({1});
  EXPECT_THROW(pg_->all_reduce(t), PeerFailure);
}

}  // namespace
}  // namespace distcomm
