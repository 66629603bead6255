// A template for writing a distcomm backend plugin: copy this folder, rename, implement.
//
// The plugin below is complete and loads (`init_process_group({.backend = "template"})`),
// but it only serves groups of one rank. A real backend replaces the bodies with its
// library's calls. What the core guarantees before calling you (see api/plugin/backend.h):
//   - arguments are validated (shapes, dtypes, roots, peers, op/dtype pairs),
//   - tensors are flat and contiguous; list forms are packed for you,
//   - AVG / PREMUL_SUM are rewritten to SUM unless reduces_natively() says otherwise,
//   - ctx.timeout is resolved and ctx.description names rank, group, op and seq.
// What you owe the core:
//   - return a Work at once and finish it later, in issue order per group,
//   - fail it with distcomm errors (Timeout, PeerFailure, ...) instead of hanging,
//   - after a transport fault, fail every later op fast,
//   - shutdown() stops your threads without waiting on peers.
//
// Build it against the headers only (never link libdistcomm into a plugin: the core is
// already in the process when you are loaded). Against an installed distcomm:
//   g++ -std=c++17 -shared -fPIC $(pkg-config --cflags distcomm) -o libdistcomm_mine.so mine.cc
// and put the file in <prefix>/lib/distcomm/plugins or a folder of DISTCOMM_PLUGIN_PATH.
// In this repository: cc_binary(name = "libdistcomm_mine.so", linkshared = 1, srcs = [...],
//                               deps = ["//api:headers"])
#include <cstring>

#include <distcomm/api/errors.h>
#include <distcomm/api/plugin/plugin.h>

namespace {

using namespace distcomm;

class TemplateBackend : public Backend {
 public:
  explicit TemplateBackend(BackendOptions options) : Backend(std::move(options)) {
    // Rendezvous goes here: exchange addresses through options().store, connect to peers.
    if (size() != 1) throw Unsupported("backend template serves groups of one rank; implement the transport");
  }

  std::string name() const override { return "template"; }

  // List only what you implement: the ProcessGroup refuses the rest with a clear message.
  std::vector<OpType> supported_ops() const override { return {OpType::kAllReduce, OpType::kBarrier}; }

  WorkPtr all_reduce(Tensor& tensor, const AllReduceOptions& opts, const OpContext& ctx) override {
    auto work = std::make_shared<Work>(OpType::kAllReduce, ctx.seq, ctx.description);
    // A real backend enqueues the op on its worker and finishes the Work from there.
    // With one rank the reduction of one tensor is the tensor itself.
    work->finish();
    return work;
  }

  WorkPtr barrier(const BarrierOptions&, const OpContext& ctx) override {
    auto work = std::make_shared<Work>(OpType::kBarrier, ctx.seq, ctx.description);
    work->finish();
    return work;
  }
};

// Every key your backend reads from options().config, with its default, the environment
// variable init_process_group reads it from (or nullptr) and one line of help. init then
// refuses keys no backend of the group declares, and docs/environment.md's table lists them.
// Read them once, in your constructor, with ConfigReader (api/plugin/config_reader.h), so that a bad
// value is refused as every backend refuses it. This one reads none.
const distcomm_config_key kConfigKeys[] = {
    {nullptr, nullptr, nullptr, nullptr},
};

// Probe without side effects: is the library/device there? Say what is missing if not.
int template_available(std::string* why) { return 1; }

Backend* template_create(const BackendOptions& options) { return new TemplateBackend(options); }

}  // namespace

DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("template", "template 1.0 (example plugin)", DISTCOMM_DEVICE_CPU, 0,
                                   template_available, template_create, kConfigKeys)
