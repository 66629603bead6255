// ProcessGroup: construction (backends, exchange, config check), subgroups. The ops are in
// process_group_ops.cc, the checks and routing they share in process_group_checks.cc.
#include "api/process_group.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>

#include "api/group/auto_backend.h"
#include "api/errors.h"
#include "api/diagnostics/group_failure.h"
#include "api/store/internal/store_host.h"
#include "api/plugin/plugin_registry.h"
#include "api/store/prefix_store.h"
#include "api/diagnostics/timeline.h"
#include "api/diagnostics/trace_dump.h"

namespace distcomm {
namespace {

// This process's groups, for publish_program_failure. Weak: it keeps none alive.
class LiveGroups {
 public:
  void add(const std::shared_ptr<ProcessGroup>& pg) {
    std::lock_guard<std::mutex> lock(mu_);
    groups_.erase(std::remove_if(groups_.begin(), groups_.end(), [](const auto& w) { return w.expired(); }),
                  groups_.end());
    groups_.push_back(pg);
  }
  std::vector<std::shared_ptr<ProcessGroup>> all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<ProcessGroup>> out;
    for (const auto& w : groups_) {
      if (auto pg = w.lock()) out.push_back(std::move(pg));
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<ProcessGroup>> groups_;
};

// Never destroyed: a program may fail during static destruction.
LiveGroups& live_groups() {
  static LiveGroups* groups = new LiveGroups;
  return *groups;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// BackendSpec

BackendSpec BackendSpec::parse(const std::string& spec) {
  BackendSpec out;
  out.text = spec;
  if (spec.empty()) throw InvalidArgument("backend: empty name; expected e.g. 'gloo' or 'cpu:gloo,cuda:nccl'");
  if (spec == "auto") {
    out.by_device[DeviceType::kCPU] = spec;  // auto_backend.h: decided per group, at creation
    return out;
  }
  if (spec.find(':') == std::string::npos) {
    if (spec.find(',') != std::string::npos) {
      throw InvalidArgument("backend '" + spec + "': a list needs device types, e.g. 'cpu:gloo,cuda:nccl'");
    }
    return out;  // one backend for every device it serves: resolved when the plugin is loaded
  }
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      throw InvalidArgument("backend '" + spec + "': '" + item + "' is not of the form device:backend");
    }
    const DeviceType dev = parse_device_type(item.substr(0, colon));
    if (!out.by_device.emplace(dev, item.substr(colon + 1)).second) {
      throw InvalidArgument("backend '" + spec + "': device '" + item.substr(0, colon) + "' given twice");
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Construction

ProcessGroup::ProcessGroup(ProcessGroupOptions options)
    : options_(std::move(options)),
      where_prefix_("rank " + std::to_string(options_.rank) + "/" + std::to_string(options_.size) + " group '" +
                    options_.group_name + "' ") {}

std::vector<std::string> BackendSpec::names(const PluginSearch& plugins) const {
  if (by_device.empty()) return {text};
  std::vector<std::string> out;
  auto add = [&](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const auto& [device, name] : by_device) {
    if (name != "auto") add(name);
    else for (const std::string& candidate : auto_backend_candidates(plugins)) add(candidate);
  }
  return out;
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(ProcessGroupOptions options) {
  // A program that makes its world group itself, without init_process_group: this call is
  // its edge, where the environment is read (process_environment.h).
  if (!options.environment) options.environment = ProcessEnvironment::read();
  return build(std::move(options), /*check_config=*/true);
}

std::shared_ptr<ProcessGroup> ProcessGroup::build(ProcessGroupOptions options, bool check_config, ProcessGroup* parent,
                                                  const std::vector<int>& members) {
  if (options.size < 1) throw InvalidArgument("ProcessGroup: size must be >= 1, got " + std::to_string(options.size));
  if (options.rank < 0 || options.rank >= options.size) {
    throw InvalidArgument("ProcessGroup: rank " + std::to_string(options.rank) + " is outside [0, " +
                          std::to_string(options.size) + ")");
  }
  if (options.global_ranks.empty()) {
    options.global_ranks.resize(static_cast<size_t>(options.size));
    std::iota(options.global_ranks.begin(), options.global_ranks.end(), 0);
  }
  if (static_cast<int>(options.global_ranks.size()) != options.size) {
    throw InvalidArgument("ProcessGroup: global_ranks has " + std::to_string(options.global_ranks.size()) +
                          " entries for a group of " + std::to_string(options.size));
  }
  if (!options.store && needs_store(options.backend, options.environment->plugins)) {
    throw InvalidArgument("ProcessGroup: backend '" + options.backend +
                          "' finds its peers through a store shared by every rank, and none was given");
  }
  std::shared_ptr<ProcessGroup> pg(new ProcessGroup(std::move(options)));
  // This rank's own mistakes are refused at once, before it waits for anyone.
  pg->spec_ = BackendSpec::parse(pg->options_.backend);
  if (check_config) check_backend_config(pg->spec_.names(pg->plugins()), pg->options_.backend_config, pg->plugins());
  InitWait wait = pg->creation_wait();
  std::exception_ptr failure;
  try {
    if (pg->options_.store) {
      pg->arrive(wait);
      // Over a store the exchange needs no backend, and backend "auto" needs the exchange.
      pg->create_exchange();
    }
    pg->create_backends(parent, members, wait);
  } catch (...) {
    failure = std::current_exception();
  }
  // Once it has a namespace, a rank that failed (even in arrival: a Timeout naming the
  // ranks that never came) tells the others, whose waits end as soon as they see it.
  if (!pg->store_prefix_.empty()) {
    try {
      pg->confirm_created(wait, failure);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(pg->with_store_host(failure));
  pg->create_recorder();
  if (!pg->exchange_) pg->create_exchange();
  pg->log_created();
  live_groups().add(pg);
  return pg;
}

std::exception_ptr ProcessGroup::with_store_host(const std::exception_ptr& failure) const {
  if (options_.store_host.empty()) return failure;
  try {
    std::rethrow_exception(failure);
  } catch (const StoreError& e) {
    return internal::store_lost(e.what(), options_.store_host);
  } catch (...) {
    return failure;
  }
}

void ProcessGroup::publish_program_failure(const std::exception_ptr& error) {
  for (const std::shared_ptr<ProcessGroup>& pg : live_groups().all()) {
    if (!pg->options_.store || pg->size() == 1) continue;
    FailureRecord r;
    r.kind = FailureRecord::kind_of(error);
    r.rank = pg->rank();
    r.culprit = pg->rank();
    r.message = pg->where_prefix_.substr(0, pg->where_prefix_.size() - 1) + ": its program ended with an error: " +
                message_of(error);
    r.time = std::chrono::system_clock::now();
    for (const auto& [device, backend] : pg->backends_) {
      // Where that backend's GroupFailure reads (its BackendOptions::store).
      GroupFailure::publish_record(
          std::make_shared<PrefixStore>(pg->backend_store_prefix(device, pg->plugin_of_[device]), pg->options_.store),
          r);
    }
  }
}

bool ProcessGroup::needs_store(const std::string& backend_spec, const PluginSearch& plugins) {
  for (const std::string& name : BackendSpec::parse(backend_spec).names(plugins)) {
    if (!(load_plugin(name, plugins).flags & DISTCOMM_PLUGIN_SELF_RENDEZVOUS)) return true;
  }
  return false;
}

bool ProcessGroup::needs_store(const std::string& backend_spec) {
  return needs_store(backend_spec, PluginSearch::from_environment());
}

void ProcessGroup::create_exchange() {
  HostExchangeOptions o;
  o.rank = rank();
  o.size = size();
  o.timeout = options_.timeout;
  o.where = "rank " + std::to_string(rank()) + "/" + std::to_string(size()) + " group '" + name() + "'";
  o.store_host = options_.store_host;
  if (options_.store) {
    exchange_ = make_store_exchange(o, options_.store, store_prefix_ + "exchange/");
  } else {
    exchange_ = make_collective_exchange(o, [this](Tensor& out, const Tensor& in) { host_all_gather(out, in); });
  }
}

void ProcessGroup::host_all_gather(Tensor& out, const Tensor& in) {
  constexpr OpType kOp = OpType::kAllGather;
  Backend& b = route(kOp, in);
  OpContext ctx = next_context(kOp, &in, options_.timeout, OpKind::kInternal);
  ctx.description += " (host message exchange)";
  recorded(ctx, [&] { return b.all_gather(out, in, AllGatherOptions(), ctx); })->wait();
}

std::map<DeviceType, std::string> ProcessGroup::plan_of(const BackendSpec& spec, const PluginSearch& plugins) {
  std::map<DeviceType, std::string> plan = spec.by_device;
  if (plan.empty()) {
    // One name: it serves every device type its plugin declares.
    const PluginInfo& info = load_plugin(spec.text, plugins);
    if (info.devices & DISTCOMM_DEVICE_CPU) plan[DeviceType::kCPU] = spec.text;
    if (info.devices & DISTCOMM_DEVICE_CUDA) plan[DeviceType::kCUDA] = spec.text;
  }
  return plan;
}

InitWait ProcessGroup::creation_wait() const {
  std::string where = where_prefix_;
  where.pop_back();  // its trailing space
  InitWait w = InitWait::starting_now(options_.timeout, options_.creation_report_every, std::move(where));
  if (options_.creation_deadline != InitWait::Clock::time_point{}) w.deadline = options_.creation_deadline;
  w.global_ranks = options_.global_ranks;
  return w;
}

std::string ProcessGroup::backend_store_prefix(DeviceType device, const std::string& backend) const {
  return store_prefix_ + device_type_name(device) + "/" + backend;
}

void ProcessGroup::arrive(InitWait& wait) {
  Store& store = *options_.store;
  const std::string base = "pg/" + name();
  // Each rank counts its own creations of this name: the n-th one of every rank is the
  // same group.
  const int64_t n = store.add(base + "/made_by/" + std::to_string(rank()), 1);
  store_prefix_ = n == 1 ? base + "/" : base + "@" + std::to_string(n) + "/";
  // From here on a rank that fails tells the others (confirm_created), and every wait
  // of theirs, this one first, ends as soon as it sees that.
  wait.failure_store = options_.store.get();
  wait.failure_key = store_prefix_ + kCreationFailedKey;
  wait.store_host = options_.store_host;
  // Every rank arrives before any backend waits for it (each in its own way, few of which
  // can say whom they wait for): one that never comes is named here.
  if (size() > 1) wait_for_arrivals(store, store_prefix_, rank(), size(), wait, options_.store_text);
}

namespace {

// Whether this rank's failure may be the consequence of `first`, another rank's: a peer
// that refused or closed a connection (the first failing rank has gone), unless it quotes
// `first` already. A Timeout is this rank's own verdict (often on the same missing rank),
// and anything else its own mistake (a bad setting, a missing library).
bool may_be_consequence(const std::exception_ptr& failure, const std::string& first) {
  try {
    std::rethrow_exception(failure);
  } catch (const PeerFailure& e) {
    return std::string(e.what()).find(first) == std::string::npos;
  } catch (...) {
    return false;
  }
}

}  // namespace

void ProcessGroup::confirm_created(const InitWait& wait, const std::exception_ptr& failure) {
  if (size() == 1) return;
  Store& store = *options_.store;
  auto key = [&](int r) { return store_prefix_ + "created/" + std::to_string(r); };
  // The first rank to fail says so here; a rank failing after it (often because of it: the
  // first one left, so its connections were refused) reports that first failure.
  const std::string first_key = store_prefix_ + kCreationFailedKey;
  if (failure) {
    const std::string mine = encode_creation_failure(rank(), failure);
    std::string first;
    try {
      store.set(key(rank()), mine);
      first = to_string(store.compare_set(first_key, {}, to_bytes(mine)));
      // Also where each backend's rendezvous looks (InitWait::for_backend), so that the
      // others' backends stop waiting for this rank.
      for (const std::string& backend : spec_.names(plugins())) {
        for (DeviceType device : {DeviceType::kCPU, DeviceType::kCUDA}) {
          store.compare_set(backend_store_prefix(device, backend) + "/" + kCreationFailedKey, {}, to_bytes(first));
        }
      }
    } catch (const Error&) {
      return;  // the store is gone too; this rank's own failure says more
    }
    // This rank may serve the store: the others read the failure there before it goes.
    internal::note_failure_for_peers();
    const CreationFailure earlier = CreationFailure::decode(first);
    if (first != mine && may_be_consequence(failure, earlier.text)) {
      earlier.raise(where_prefix_ + "creation failed first on " + earlier.text + " -- and then here: rank " +
                    std::to_string(rank()) + ": " + message_of(failure));
    }
    return;  // this rank throws its own
  }
  store.set(key(rank()), std::string("ok"));
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (int r = 0; r < size(); ++r) {
    keys.push_back(key(r));
    ranks.push_back(r);
  }
  wait_for_keys(store, keys, ranks, wait, "to finish creating the group's backends",
                "they are still in (or stuck in) their backends' rendezvous");
  for (int r = 0; r < size(); ++r) {
    const std::string said = store.get_string(keys[static_cast<size_t>(r)]);
    if (said == "ok") continue;
    const CreationFailure first = CreationFailure::decode(store.check({first_key}) ? store.get_string(first_key) : said);
    first.raise(where_prefix_ + "creation failed on " + first.text + "; the group is unusable here too");
  }
}

void ProcessGroup::create_backends(ProcessGroup* parent, const std::vector<int>& members, const InitWait& wait) {
  std::map<DeviceType, std::string> plan = plan_of(spec_, plugins());
  // Decided before "auto" is resolved below, as the parent's ranks outside this subgroup
  // decide it (skip_subgroup): every rank of the parent must ask the same backends.
  const std::map<DeviceType, Backend*> parents = parent ? parent->parents_of_subgroup(spec_.text)
                                                        : std::map<DeviceType, Backend*>{};
  auto cpu = plan.find(DeviceType::kCPU);
  if (cpu != plan.end() && cpu->second == "auto") {
    if (!exchange_) throw InvalidArgument("backend 'auto' needs a store shared by the ranks (env://, tcp:// or file://)");
    cpu->second = choose_auto_cpu_backend(exchange_->all_gather(auto_backend_placement(plugins())));
    spec_.text += " (cpu: " + cpu->second + ")";
  }
  const bool several = plan.size() > 1;
  for (const auto& [device, name] : plan) {
    BackendOptions bo;
    if (options_.store) {
      bo.store = std::make_shared<PrefixStore>(backend_store_prefix(device, name), options_.store);
    }
    bo.rank = options_.rank;
    bo.size = options_.size;
    bo.global_ranks = options_.global_ranks;
    bo.group_name = options_.group_name;
    bo.timeout = options_.timeout;
    bo.device = device;
    bo.config = options_.backend_config;
    // What is left of the creation's deadline goes to the backend's rendezvous (init_wait.h).
    bo.config[kInitTimeLeftKey] = std::to_string(wait.left().count());
    bo.config[kInitReportKey] = std::to_string(wait.report_every.count());
    try {
      std::unique_ptr<Backend> backend;
      auto from = parents.find(device);
      if (from != parents.end()) backend.reset(from->second->create_subgroup_backend(&bo, members));
      if (!backend) backend = create_backend(name, bo, plugins());
      backends_[device] = std::move(backend);
      plugin_of_[device] = name;
      abi_minor_[device] = load_plugin(name, plugins()).abi_minor;
      supported_ops_[device] = backends_[device]->supported_ops();
    } catch (const BackendUnavailable& e) {
      // In a mixed group ("cpu:gloo,cuda:nccl") a backend that cannot run here (no GPU)
      // fails the ops of its device only, as c10d's lazy backends do; alone, it fails now.
      if (!several) throw;
      backend_errors_[device] = e.what();
    }
  }
}

void ProcessGroup::create_recorder() {
  const TraceSettings& trace = options_.environment->trace;
  timeline_configure(trace.timeline_file, trace.run_id);
  size_t capacity = trace.buffer;
  // The timeline draws ops from the recorder as they end: it keeps a small one on.
  if (timeline_enabled()) capacity = std::max<size_t>(capacity, 64);
  if (capacity == 0) return;
  recorder_ = std::make_shared<FlightRecorder>(capacity);
  TraceGroupInfo info;
  info.name = name();
  info.rank = rank();
  info.size = size();
  info.global_ranks = options_.global_ranks;
  info.backend = spec_.text;
  for (const auto& [device, backend] : backends_) {
    std::string version = std::string(device_type_name(device)) + ": " + backend->name();
    try {
      version += " (" + load_plugin(backend->name(), plugins()).version + ")";
    } catch (const Error&) {
      // a backend whose name is not its plugin's: its name alone
    }
    info.versions.push_back(version);
  }
  recorder_->set_info(std::move(info));
  register_for_dumps(recorder_, trace);
}

ProcessGroup::~ProcessGroup() {
  log_destroyed();
  for (auto& [device, backend] : backends_) backend->shutdown();
}

void ProcessGroup::abort() {
  aborted_ = true;
  for (auto& [device, backend] : backends_) {
    // Backend::abort is an ABI 1.4 virtual: an older plugin's vtable has no such slot.
    if (abi_minor_[device] >= 4) {
      backend->abort();
    } else {
      backend->shutdown();
    }
  }
}

int ProcessGroup::global_rank(int group_rank) const {
  if (group_rank < 0 || group_rank >= size()) {
    throw InvalidArgument("group '" + name() + "' has no rank " + std::to_string(group_rank));
  }
  return options_.global_ranks[static_cast<size_t>(group_rank)];
}

Backend& ProcessGroup::backend_for(DeviceType device) {
  auto it = backends_.find(device);
  if (it != backends_.end()) return *it->second;
  auto err = backend_errors_.find(device);
  if (err != backend_errors_.end()) throw BackendUnavailable(err->second);
  throw InvalidArgument("group '" + name() + "' (backend '" + spec_.text + "') has no backend for " +
                        device_type_name(device) + " tensors");
}

// ---------------------------------------------------------------------------------------
// Subgroups

std::map<DeviceType, Backend*> ProcessGroup::parents_of_subgroup(const std::string& spec) {
  std::map<DeviceType, Backend*> out;
  for (const auto& [device, name] : plan_of(BackendSpec::parse(spec), plugins())) {
    auto mine = backends_.find(device);
    if (mine == backends_.end() || plugin_of_[device] != name || abi_minor_[device] < 4) continue;
    out[device] = mine->second.get();
  }
  return out;
}

void ProcessGroup::skip_subgroup(const std::string& spec, const std::vector<int>& members) {
  for (const auto& [device, backend] : parents_of_subgroup(spec)) {
    // A backend that breaks the rule and makes one anyway gets it deleted here.
    std::unique_ptr<Backend> none(backend->create_subgroup_backend(nullptr, members));
  }
}

std::shared_ptr<ProcessGroup> ProcessGroup::make_subgroup(const std::vector<int>& ranks, const std::string& backend,
                                                          const std::string& tag) {
  const std::string spec = backend.empty() ? options_.backend : backend;
  const auto me = std::find(ranks.begin(), ranks.end(), rank());
  if (me == ranks.end()) {
    skip_subgroup(spec, ranks);
    return nullptr;
  }
  ProcessGroupOptions o = options_;
  o.rank = static_cast<int>(me - ranks.begin());
  o.size = static_cast<int>(ranks.size());
  o.group_name = name() + "/" + tag;
  o.backend = spec;
  o.creation_deadline = {};  // a subgroup's creation counts from new_group
  o.global_ranks.clear();
  for (int r : ranks) o.global_ranks.push_back(global_rank(r));
  return build(std::move(o), /*check_config=*/false, this, ranks);
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks, const std::string& backend) {
  // Counted on every rank, member or not, so all ranks agree on the next group's name.
  const uint64_t id = subgroups_++;
  if (ranks.empty()) throw InvalidArgument("new_group on group '" + name() + "': 'ranks' is empty");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= size()) {
      throw InvalidArgument("new_group on group '" + name() + "': rank " + std::to_string(sorted[i]) +
                            " is outside [0, " + std::to_string(size()) + ")");
    }
    if (i && sorted[i] == sorted[i - 1]) {
      throw InvalidArgument("new_group on group '" + name() + "': rank " + std::to_string(sorted[i]) +
                            " is listed twice in " + rank_list_text(ranks));
    }
  }
  return make_subgroup(sorted, backend, "g" + std::to_string(id));
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
  const uint64_t id = subgroups_++;
  // One round: everyone learns everyone's (color, key).
  const auto all = exchange().all_gather(std::to_string(color) + " " + std::to_string(key));
  if (color < 0) {
    skip_subgroup(options_.backend, {});
    return nullptr;
  }
  std::vector<std::pair<int, int>> members;  // (key, rank) of my color
  for (int r = 0; r < size(); ++r) {
    std::istringstream in(all[static_cast<size_t>(r)]);
    int c = 0, k = 0;
    in >> c >> k;
    if (c == color) members.emplace_back(k, r);
  }
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (auto& m : members) ranks.push_back(m.second);
  return make_subgroup(ranks, "", "s" + std::to_string(id) + "c" + std::to_string(color));
}

}  // namespace distcomm
