// The list forms of device tensors (all_gather into a list, gather, scatter, reduce_scatter
// from a list, all_to_all of lists). The host cannot pack them, so the ProcessGroup hands
// each list whole to a backend that names the op in Backend::list_ops() (ABI 1.6; nccl
// does), and refuses it, before the op is numbered, where the backend does not.
//
// The backends are the in_process test plugin and its twin in_process_cuda: the "cuda" tensors
// here hold host memory, which that plugin reads whatever device a tensor names. What is
// tested is the core's side: which virtual gets which tensors, the results landing in the
// caller's tensors, one sequence number per op, and the refusals.
#include <gtest/gtest.h>

#include <deque>

#include "api/errors.h"
#include "api/process_group.h"
#include "tests/backends/conformance/conformance.h"
#include "tests/testing/in_process_group.h"

namespace distcomm {
namespace {

using testing::in_process_world;
using testing::InProcessOptions;
using testing::on_every_rank;
using Doubles = std::vector<double>;

// A "cuda:0" tensor over host memory, and that memory.
struct DeviceTensor {
  Tensor host;
  Tensor device;
};

DeviceTensor on_device(const std::vector<float>& values) {
  Tensor host = Tensor::of<float>(values);
  return {host, Tensor::from_blob(host.data(), {host.numel()}, DType::kFloat32, Device::cuda(0))};
}

// n device tensors of `count` elements, filled with -1, and their host views.
struct DeviceList {
  std::vector<DeviceTensor> parts;
  std::vector<Tensor> tensors;  // the device ones, as the ops take them
};

DeviceList device_list(const std::vector<int64_t>& counts) {
  DeviceList l;
  for (int64_t c : counts) {
    l.parts.push_back(on_device(std::vector<float>(static_cast<size_t>(c), -1.0f)));
    l.tensors.push_back(l.parts.back().device);
  }
  return l;
}

InProcessOptions serving_cuda(const std::string& lists = "") {
  InProcessOptions o;
  o.backend = "cpu:in_process,cuda:in_process_cuda";
  if (lists != "default") o.config["in_process_lists"] = lists;
  return o;
}

std::string refusal(const std::function<void()>& op) {
  try {
    op();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DeviceListsTest, EveryListFormGoesWholeToTheBackendAndLandsInTheCallersTensors) {
  auto world = in_process_world(3, serving_cuda("default"));
  on_every_rank(world, [](ProcessGroup& pg) {
    const int r = pg.rank(), n = pg.size();
    const uint64_t seq0 = pg.next_seq();

    DeviceTensor mine = on_device({float(r), float(10 * r)});
    DeviceList gathered = device_list({2, 2, 2});
    WorkPtr w = pg.all_gather(gathered.tensors, mine.device);
    w->wait();
    EXPECT_EQ(w->op(), OpType::kAllGather);
    for (int k = 0; k < n; ++k) EXPECT_EQ(gathered.parts[k].host.to_doubles(), (Doubles{1.0 * k, 10.0 * k})) << "rank " << r;

    GatherOptions at_1;
    at_1.root = 1;
    DeviceList at_root = r == 1 ? device_list({2, 2, 2}) : DeviceList{};
    pg.gather(at_root.tensors, mine.device, at_1)->wait();
    for (size_t k = 0; k < at_root.parts.size(); ++k) {
      EXPECT_EQ(at_root.parts[k].host.to_doubles(), (Doubles{1.0 * k, 10.0 * k}));
    }

    ScatterOptions from_2;
    from_2.root = 2;
    DeviceList sent;
    if (r == 2) {
      for (int k = 0; k < n; ++k) {
        sent.parts.push_back(on_device({100.0f + k}));
        sent.tensors.push_back(sent.parts.back().device);
      }
    }
    DeviceTensor share = on_device({-1.0f});
    pg.scatter(share.device, sent.tensors, from_2)->wait();
    EXPECT_EQ(share.host.to_doubles(), (Doubles{100.0 + r}));

    // inputs[k] = r + 10k: rank r gets the sum over every rank s of s + 10r.
    DeviceList blocks;
    for (int k = 0; k < n; ++k) {
      blocks.parts.push_back(on_device({float(r + 10 * k)}));
      blocks.tensors.push_back(blocks.parts.back().device);
    }
    DeviceTensor reduced = on_device({-1.0f});
    pg.reduce_scatter(reduced.device, blocks.tensors)->wait();
    EXPECT_EQ(reduced.host.to_doubles(), (Doubles{3.0 + 30.0 * r}));

    // Uneven all_to_all: rank r sends k+1 elements of 100r + k to rank k, so it gets r+1
    // elements of 100k + r from each rank k.
    DeviceList outgoing, incoming = device_list({r + 1, r + 1, r + 1});
    for (int k = 0; k < n; ++k) {
      outgoing.parts.push_back(on_device(std::vector<float>(static_cast<size_t>(k + 1), float(100 * r + k))));
      outgoing.tensors.push_back(outgoing.parts.back().device);
    }
    WorkPtr a2a = pg.all_to_all(incoming.tensors, outgoing.tensors);
    a2a->wait();
    EXPECT_EQ(a2a->op(), OpType::kAllToAll);
    for (int k = 0; k < n; ++k) {
      EXPECT_EQ(incoming.parts[k].host.to_doubles(), Doubles(static_cast<size_t>(r + 1), 100.0 * k + r))
          << "rank " << r << " from " << k;
    }
    EXPECT_EQ(pg.next_seq(), seq0 + 5) << "one sequence number per list op";
  });
}

// A backend that does not take the lists of its device: every list form is refused on
// every rank before it is numbered, saying why and what to use; the group goes on.
TEST(DeviceListsTest, ABackendThatDoesNotTakeListsRefusesThemBeforeAnythingIsSent) {
  auto world = in_process_world(2, serving_cuda(""));
  on_every_rank(world, [](ProcessGroup& pg) {
    DeviceTensor one = on_device({float(pg.rank())});
    DeviceList two = device_list({1, 1});
    GatherOptions g;
    ScatterOptions s;
    std::vector<Tensor> none;
    const std::vector<std::pair<std::string, std::function<void()>>> ops = {
        {"use all_gather_into_tensor", [&] { pg.all_gather(two.tensors, one.device); }},
        {"gather into one tensor", [&] { pg.gather(pg.rank() == 0 ? two.tensors : none, one.device, g); }},
        {"scatter from one tensor", [&] { pg.scatter(one.device, pg.rank() == 0 ? two.tensors : none, s); }},
        {"use reduce_scatter_tensor", [&] { pg.reduce_scatter(one.device, two.tensors); }},
        {"use all_to_all_single", [&] { pg.all_to_all(two.tensors, two.tensors); }},
    };
    for (const auto& [instead, op] : ops) {
      const std::string m = refusal(op);
      EXPECT_TRUE(contains(m, "the list form packs on the host, which cannot reach cuda:0 tensors, and backend "
                              "in_process_cuda does not take them whole (it does not list the op in list_ops()); " +
                                  instead))
          << m;
      EXPECT_TRUE(contains(m, "rank " + std::to_string(pg.rank()) + "/2 group 'world'")) << m;
    }
    EXPECT_EQ(pg.next_seq(), 0u) << "a refused op takes no sequence number";
    // Nothing was sent: the flat form still meets on every rank.
    DeviceTensor both = on_device({-1.0f, -1.0f});
    pg.all_gather_into_tensor(both.device, one.device)->wait();
    EXPECT_EQ(both.host.to_doubles(), (Doubles{0, 1}));
  });
}

// What the core checks before a list goes whole: AVG the backend cannot do on the device
// (the host cannot divide device memory), a list's tensor on another device.
TEST(DeviceListsTest, WholeListsAreCheckedLikeTheFlatOps) {
  auto world = in_process_world(2, serving_cuda("default"));
  on_every_rank(world, [](ProcessGroup& pg) {
    DeviceTensor out = on_device({0.0f});
    DeviceList in = device_list({1, 1});
    ReduceScatterOptions avg;
    avg.op = ReduceOp::AVG;
    const std::string m = refusal([&] { pg.reduce_scatter(out.device, in.tensors, avg); });
    EXPECT_TRUE(contains(m, "backend in_process_cuda has no avg for")) << m;

    DeviceTensor elsewhere = on_device({0.0f});
    std::vector<Tensor> mixed = {in.tensors[0], Tensor::from_blob(elsewhere.host.data(), {1}, DType::kFloat32,
                                                                   Device::cuda(1))};
    const std::string d = refusal([&] { pg.all_gather(mixed, out.device); });
    EXPECT_TRUE(contains(d, "'outputs[1]' is float32[1] on cuda:1")) << d;  // the element that differs, by index

    // What a rank sends itself must fit what it expects from itself: NCCL's send to self
    // of another count than its receive would not end.
    DeviceList two = device_list({1, 1}), unfit = device_list({2, 2});
    const std::string a = refusal([&] { pg.all_to_all(unfit.tensors, two.tensors); });
    EXPECT_TRUE(contains(a, "inputs[" + std::to_string(pg.rank()) + "] has 1 elements but outputs[" +
                                std::to_string(pg.rank()) + "] has 2"))
        << a;
    EXPECT_EQ(pg.next_seq(), 0u);
  });
}

// The conformance suite's list checks (every dtype, counts 0 to 1000, guards around
// outputs, uneven all_to_all) on "cuda" tensors: a Placement whose device copies are host
// memory labelled cuda:0, kept until the rank's sweep ends.
class PosingAsCuda {
 public:
  PosingAsCuda()
      : placement_{[this](const Tensor& host) {
                     held_.push_back(host.clone());
                     const Tensor& h = held_.back();
                     return Tensor::from_blob(h.data(), h.shape(), h.dtype(), Device::cuda(0));
                   },
                   [](const Tensor& on_device) {
                     return Tensor::from_blob(on_device.data(), on_device.shape(), on_device.dtype(), Device::cpu())
                         .clone();
                   }} {}
  const conformance::Placement& placement() const { return placement_; }

 private:
  const conformance::Placement placement_;
  std::deque<Tensor> held_;
};

TEST(DeviceListsTest, TheConformanceListChecksPassOnDeviceTensors) {
  auto world = in_process_world(3, serving_cuda("default"));
  on_every_rank(world, [](ProcessGroup& pg) {
    PosingAsCuda cuda;
    const auto& p = cuda.placement();
    for (int64_t count : {0, 1, 7, 1000}) {
      for (DType dtype : conformance::all_dtypes()) {
        conformance::check_all_gather(pg, dtype, count, conformance::Layout::kList, p);
        conformance::check_gather(pg, dtype, count, pg.size() - 1, p);
        conformance::check_scatter(pg, dtype, count, 0, p);
        conformance::check_all_to_all_list(pg, dtype, count, p);
        conformance::check_reduce_scatter(pg, dtype, ReduceOp::SUM, count, conformance::Layout::kList, p);
      }
    }
  });
}

}  // namespace
}  // namespace distcomm
