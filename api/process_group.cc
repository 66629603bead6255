// ProcessGroup: construction (its creation is group_creation.h's), the exchange, the
// recorder, subgroups. The ops and their pipeline are in process_group_ops.cc.
#include "api/process_group.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <sstream>
#include <utility>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/timeline.h"
#include "api/diagnostics/trace_dump.h"
#include "api/errors.h"
#include "api/group/creation_keys.h"
#include "api/group/group_backends.h"
#include "api/group/group_creation.h"
#include "api/group/host_layout.h"
#include "api/group/member_lists.h"
#include "api/hierarchical_backend.h"
#include "api/ops/argument_checks.h"
#include "api/ops/backend_call.h"
#include "api/ops/detail_checks.h"
#include "api/ops/op_numbering.h"
#include "api/ops/op_spec.h"
#include "api/plugin/plugin_registry.h"
#include "api/process/failure_origin.h"
#include "api/process/fork_generation.h"
#include "api/process/program_rank.h"
#include "api/store/prefix_store.h"

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
    // Kept past the group's end: the program's own exception destroys its groups on the way
    // out to run_main, which still names the rank (program_rank_text). The latest group that
    // is no subgroup (no '/' in its name: the world, or a fault-tolerant job's generation,
    // which may be smaller than the one before) takes over.
    if (pg->name().find('/') == std::string::npos) latest_top_rank_text_ = rank_text(*pg);
  }
  std::string latest_top_rank_text() {
    std::lock_guard<std::mutex> lock(mu_);
    return latest_top_rank_text_;
  }
  static std::string rank_text(const ProcessGroup& pg) {
    return "rank " + std::to_string(pg.rank()) + "/" + std::to_string(pg.size());
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
  std::string latest_top_rank_text_;
};

// Never destroyed: a program may fail during static destruction.
LiveGroups& live_groups() {
  static LiveGroups* groups = new LiveGroups;
  return *groups;
}

// The records this process left on the boards of groups destroyed while an exception
// propagated (ProcessGroup's destructor), for publish_program_failure to complete with the
// error. The store is held weakly: a program that catches the exception itself and goes on
// must not keep its stores alive here. Never destroyed, as live_groups.
struct LeftWhileFailing {
  std::weak_ptr<Store> store;
  std::string board_prefix;
  FailureRecord pending;
  std::string where;  // "rank 0/2 group 'world/g0'"
};
class LeftWhileFailingList {
 public:
  void add(LeftWhileFailing entry) {
    std::lock_guard<std::mutex> lock(mu_);
    // Bounded: a program that catches its exceptions and makes groups in a loop.
    if (entries_.size() >= 256) entries_.erase(entries_.begin());
    entries_.push_back(std::move(entry));
  }
  std::vector<LeftWhileFailing> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(entries_, {});
  }

 private:
  std::mutex mu_;
  std::vector<LeftWhileFailing> entries_;
};
LeftWhileFailingList& left_while_failing() {
  static LeftWhileFailingList* list = new LeftWhileFailingList;
  return *list;
}

// A group destroyed while an exception propagates: leaves on each of its boards (prefixes
// of `store`) a record saying this rank left while its program was failing, before its
// backends close, so that a peer seeing the close reads it (GroupFailure::record), and
// remembers them for publish_program_failure to complete. where: "rank 0/2 group 'world/g0'".
void leave_with_failing_program(const StorePtr& store, int rank, const std::string& where,
                                const std::vector<std::string>& board_prefixes) noexcept {
  try {
    FailureRecord r;
    r.kind = FailureRecord::Kind::kOther;
    r.rank = rank;
    r.culprit = rank;
    r.message = where + ": rank " + std::to_string(rank) + " " + kLeftWhileFailing + kErrorNotReportedYet;
    r.time = std::chrono::system_clock::now();
    std::vector<std::pair<StorePtr, FailureRecord>> records;
    for (const std::string& board_prefix : board_prefixes) {
      records.emplace_back(std::make_shared<PrefixStore>(board_prefix, store), r);
      left_while_failing().add({store, board_prefix, r, where});
    }
    GroupFailure::publish_records(records);
  } catch (...) {
    // In a destructor: the peers then see an orderly leave, as before.
  }
}

// What is wrong with split_group's lists on a group of `size` ranks ("" when nothing is).
std::string split_ranks_error(const std::vector<std::vector<int>>& split_ranks, int size) {
  std::vector<int> list_of(static_cast<size_t>(size), -1);
  for (size_t k = 0; k < split_ranks.size(); ++k) {
    const auto& list = split_ranks[k];
    if (list.empty()) return "split_ranks[" + std::to_string(k) + "] is empty";
    for (int r : list) {
      if (r < 0 || r >= size) {
        return "split_ranks[" + std::to_string(k) + "] names rank " + std::to_string(r) + ", outside [0, " +
               std::to_string(size) + ")";
      }
      int& seen = list_of[static_cast<size_t>(r)];
      if (seen == static_cast<int>(k)) {
        return "rank " + std::to_string(r) + " is listed twice in split_ranks[" + std::to_string(k) + "]";
      }
      if (seen >= 0) {
        return "rank " + std::to_string(r) + " is in split_ranks[" + std::to_string(seen) + "] and split_ranks[" +
               std::to_string(k) + "]: the lists must be disjoint";
      }
      seen = static_cast<int>(k);
    }
  }
  return "";
}

std::string split_ranks_text(const std::vector<std::vector<int>>& split_ranks) {
  std::string text = "[";
  for (size_t k = 0; k < split_ranks.size(); ++k) text += (k ? ", " : "") + rank_list_text(split_ranks[k]);
  return text + "]";
}

// Every subgroup maker's first step once it has taken its call's number (new_group, split,
// split_group, and so DeviceMesh's groups): on a group this rank aborted (`aborted`), a
// PeerFailure naming `call` ("split #0 on group 'world'") after `tell_others(why)` has told
// the ranks that may already wait for this rank in that call, where they wait for it. The
// group's backends are stopped, and a subgroup made from them (gloo's, mpi's, which reuse
// the parent's) would run as if nothing had happened. Refused before anything is sent; the
// others fail at once rather than at their timeout (without a store they cannot be told:
// docs/subgroups.md). The call's number stays taken (the caller's), and tell_others takes
// the call's round where it has one, so that the ranks' later calls stay paired; no backend
// of the group is told (skip_subgroup): stopped, it takes part in nothing.
void refuse_if_aborted(bool aborted, const std::string& where_prefix, const std::string& group,
                       const std::string& call, const std::function<void(const std::string& why)>& tell_others) {
  if (!aborted) return;
  try {
    tell_others("it aborted group '" + group + "' (ProcessGroup::abort) before this call");
  } catch (const Error&) {
    // A store that has gone: the others' waits learn that from the store itself.
  }
  throw PeerFailure(where_prefix + call + ": this rank aborted the group (ProcessGroup::abort) before this call; "
                    "no subgroup of it can be made");
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Construction

ProcessGroup::ProcessGroup(ProcessGroupOptions options) : options_(std::move(options)) {
  const std::string where_prefix =
      group_rank_text(options_.rank, options_.size, options_.group_name, options_.global_ranks) + " ";
  checks_ = std::make_unique<ArgumentChecks>(options_.rank, options_.size, where_prefix);
  numbering_ = std::make_unique<OpNumbering>(where_prefix, options_.timeout);
  count_forks();
  made_in_fork_generation_ = fork_generation();
  made_by_pid_ = ::getpid();
}

bool ProcessGroup::in_fork_child() const { return fork_generation() != made_in_fork_generation_; }

void ProcessGroup::refuse_in_fork_child(const std::string& what) const {
  throw InvalidArgument(what + ": this process (pid " + std::to_string(::getpid()) +
                        ") was forked from the one that made the group (pid " + std::to_string(made_by_pid_) +
                        "), and a group is not usable across fork(): its peers would take this process for the "
                        "rank. Use the group in the parent, or make the child its own group (init_process_group "
                        "with its own rank and store)");
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(ProcessGroupOptions options) {
  // A program that makes its world group itself, without init_process_group: this call is
  // its edge, where the environment is read (process_environment.h).
  BackendSpec spec = BackendSpec::parse(options.backend);
  options.backend = spec.text;  // the name in lower case ("GLOO" is gloo), as the spec has it
  return create(std::move(options), std::move(spec));
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(ProcessGroupOptions options, BackendSpec spec) {
  if (spec.text != options.backend) {
    // Subgroups and messages read options.backend: the two must be one spec.
    throw InvalidArgument("ProcessGroup::create: the parsed backend spec '" + spec.text +
                          "' is not options.backend '" + options.backend + "'");
  }
  if (!options.environment) options.environment = ProcessEnvironment::read();
  return build(std::move(options), std::move(spec), /*check_config=*/true);
}

std::shared_ptr<ProcessGroup> ProcessGroup::build(ProcessGroupOptions options, BackendSpec spec, bool check_config,
                                                  ProcessGroup* parent, const std::vector<int>& members,
                                                  const MemberLists* lists) {
  if (options.size < 1) throw InvalidArgument("ProcessGroup: size must be >= 1, got " + std::to_string(options.size));
  if (options.timeout <= std::chrono::milliseconds::zero()) {
    throw InvalidArgument("ProcessGroup: ProcessGroupOptions.timeout=" + std::to_string(options.timeout.count()) +
                          " ms: give a positive timeout (the group's creation and every op that sets none take it)");
  }
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
  if (!options.store && spec.needs_store(options.environment->plugins)) {
    throw InvalidArgument("ProcessGroup: backend '" + options.backend +
                          "' finds its peers through a store shared by every rank, and none was given");
  }
  std::shared_ptr<ProcessGroup> pg(new ProcessGroup(std::move(options)));
  // This rank's own mistakes are refused at once, before it waits for anyone.
  if (check_config) {
    check_backend_config(spec.names_taking_settings(pg->plugins(), pg->options_.backend_config),
                         pg->options_.backend_config, pg->plugins());
  }
  GroupCreation creation(pg->options_, std::move(spec), lists);
  // A group outside init_process_group's world (ft's generations, named "ft") numbers its
  // ranks its own way: the losses its backends record name no job rank.
  const std::string& name = pg->options_.group_name;
  std::optional<GroupsWithRanksOfTheirOwn> own_ranks;
  if (name != "world" && name.rfind("world/", 0) != 0) own_ranks.emplace();
  std::exception_ptr failure;
  try {
    if (pg->options_.store) {
      creation.arrive();
      pg->store_prefix_ = creation.store_prefix();
      // Over a store the exchange needs no backend, and backend "auto" needs the exchange.
      pg->create_exchange();
    }
    pg->backends_ = std::make_unique<GroupBackends>(
        creation.make_backends(parent ? parent->backends_.get() : nullptr, members, pg->exchange_.get()));
    // Part of this creation, so that a rank whose levels fail tells the others here (confirm,
    // below), and ranks waiting in a level for one that failed elsewhere learn it.
    if (creation.hierarchical()) {
      const EnclosingCreationScope enclosing(creation.wait());
      pg->make_levels(creation);
    }
  } catch (...) {
    failure = std::current_exception();
  }
  // Once it has a namespace, a rank that failed (even in arrival: a Timeout naming the
  // ranks that never came) tells the others, whose waits end as soon as they see it.
  // (The prefix is chosen before arrival waits: a Timeout there is confirmed too.)
  if (!creation.store_prefix().empty()) {
    try {
      creation.confirm(failure);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  if (failure && parent && creation.list_refused()) parent->leave_subgroup(creation.spec());
  if (failure) std::rethrow_exception(creation.with_store_host(failure));
  pg->spec_ = creation.spec();
  if (creation.hierarchical()) {
    pg->spec_.text += " (cpu: shm within hosts, " + creation.across_backend() + " across; " +
                      HostLayout::from_placements(creation.placements()).describe() + ")";
  }
  {
    size_t k = 0;
    for (const auto& [device, b] : pg->backends_->all()) {
      if (k == pg->backend_names_.size()) break;
      if (!b.backend) continue;
      pg->backend_names_[k++] = {b.backend.get(), Work::intern_backend_name(b.backend->name())};
    }
  }
  if (!check_config && pg->options_.store) {
    // A group made from a parent (a subgroup, a shrink): made and destroyed many times in a
    // long job, its creation's keys go with it (creation_keys.h). Its name, a parent's
    // creation and a call's number, is never made again, unless new_group's (the groups of
    // disjoint lists share it): its creation count goes with that call (new_group).
    auto keys = std::make_unique<CreationKeys>();
    keys->store = pg->options_.store;
    keys->prefix = pg->store_prefix_;
    if (!lists) keys->name_base = group_store_base(pg->name());
    keys->rank = pg->rank();
    keys->size = pg->size();
    keys->backend_stores = creation.backend_stores();
    for (const auto& [device, b] : pg->backends_->all()) {
      // A failure board that publish_program_failure wrote, past the backend's own store.
      keys->more.push_back(backend_store_prefix(pg->store_prefix_, device, b.plugin) + "/failure");
    }
    pg->creation_keys_ = std::move(keys);
  }
  try {
    pg->create_recorder();
  } catch (...) {
    // Its dump thread may not start (a limit on threads): the error names this rank and group.
    const std::string& where = pg->checks_->where_prefix();  // "rank 1/4 group 'world' "
    std::rethrow_exception(with_context(std::current_exception(), where.substr(0, where.size() - 1)));
  }
  if (!pg->exchange_) pg->create_exchange();
  if (pg->options_.debug == DebugLevel::kDetail && pg->size() > 1) {
    pg->detail_ = std::make_unique<DetailChecks>(pg->rank(), pg->options_.store, pg->store_prefix_, *pg->exchange_,
                                                 *pg->numbering_);
  }
  pg->log_created();
  live_groups().add(pg);
  return pg;
}

void ProcessGroup::make_levels(const GroupCreation& creation) {
  // Its groups within and across hosts, split from it (every rank is in one of each; the
  // lists come from the placements every rank has, so no round agrees on them), then the
  // hierarchy serves its CPU ops (hierarchical_backend.h). The groups across make their
  // own connections (gloo) or communicators (mpi).
  const HostLayout hosts = HostLayout::from_placements(creation.placements());
  const int host = hosts.host_of[static_cast<size_t>(rank())];
  const int local = hosts.local_rank_of[static_cast<size_t>(rank())];
  // Within the group's own deadline: init's timeout, or shrink's, bounds the levels too.
  const InitWait& bound = creation.wait();
  ProcessGroupPtr within =
      make_subgroup(hosts.hosts[static_cast<size_t>(host)], "shm", "hier_host" + std::to_string(host), &bound);
  ProcessGroupPtr across = make_subgroup(hosts.across_hosts()[static_cast<size_t>(local)], creation.across_backend(),
                                         "hier_local" + std::to_string(local), &bound);
  backends_->wrap(DeviceType::kCPU, [&](std::unique_ptr<Backend> flat) -> std::unique_ptr<Backend> {
    return std::make_unique<HierarchicalBackend>(std::move(flat), within, across, hosts);
  });
}

std::string program_rank_text() {
  // The latest live group that is no subgroup; else the latest such group made.
  std::shared_ptr<ProcessGroup> top;
  for (const auto& pg : live_groups().all()) {
    if (pg->name().find('/') == std::string::npos) top = pg;
  }
  if (top) return LiveGroups::rank_text(*top);
  return live_groups().latest_top_rank_text();
}

std::string with_program_rank(const std::string& message) {
  const std::string rank = program_rank_text();
  if (rank.empty()) return message;
  // "rank R" as words of the message ("rank 0/3 group 'world' ...", "rank 0 found a corrupt
  // batch"): it names the rank already.
  const std::string bare = rank.substr(0, rank.find('/'));
  for (size_t at = message.find(bare); at != std::string::npos; at = message.find(bare, at + 1)) {
    const size_t end = at + bare.size();
    const bool starts_word = at == 0 || !std::isalnum(static_cast<unsigned char>(message[at - 1]));
    const bool ends_word = end == message.size() || !std::isdigit(static_cast<unsigned char>(message[end]));
    if (starts_word && ends_word) return message;
  }
  return rank + ": " + message;
}

void ProcessGroup::publish_program_failure(const std::exception_ptr& error) {
  std::vector<std::pair<StorePtr, FailureRecord>> records;
  for (const std::shared_ptr<ProcessGroup>& pg : live_groups().all()) {
    // A fork child's failure is not its parent's rank's: the parent's groups are not told.
    if (!pg->options_.store || pg->size() == 1 || pg->in_fork_child()) continue;
    FailureRecord r;
    r.kind = FailureRecord::kind_of(error);
    r.rank = pg->rank();
    r.culprit = pg->rank();
    const std::string& where = pg->checks_->where_prefix();  // "rank 1/4 group 'world' "
    r.message = where.substr(0, where.size() - 1) + ": its program ended with an error: " + message_of(error);
    r.time = std::chrono::system_clock::now();
    for (const auto& [device, backend] : pg->backends_->all()) {
      // Where that backend's GroupFailure reads (its BackendOptions::store).
      records.emplace_back(
          std::make_shared<PrefixStore>(backend_store_prefix(pg->store_prefix_, device, backend.plugin),
                                        pg->options_.store),
          r);
    }
  }
  GroupFailure::publish_records(records);
  // The groups this rank left while the error propagated (destroyed during the unwinding,
  // before this call could find them): their records now quote the error.
  std::vector<GroupFailure::Completion> completions;
  for (LeftWhileFailing& left : left_while_failing().take()) {
    StorePtr store = left.store.lock();
    if (!store) continue;
    FailureRecord completed = left.pending;
    completed.kind = FailureRecord::kind_of(error);
    completed.message = left.where + ": rank " + std::to_string(left.pending.rank) + " " + kLeftWhileFailing +
                        "; its program ended with an error: " + message_of(error);
    completed.time = std::chrono::system_clock::now();
    completions.push_back({std::make_shared<PrefixStore>(left.board_prefix, std::move(store)), left.pending,
                           std::move(completed)});
  }
  GroupFailure::complete_records(completions);
}

bool ProcessGroup::needs_store(const std::string& backend_spec, const PluginSearch& plugins) {
  return BackendSpec::parse(backend_spec).needs_store(plugins);
}

bool ProcessGroup::needs_store(const std::string& backend_spec) {
  return needs_store(backend_spec, PluginSearch::from_environment());
}

void ProcessGroup::create_exchange() {
  HostExchangeOptions o;
  o.rank = rank();
  o.size = size();
  o.timeout = options_.timeout;
  o.where = group_rank_text(rank(), size(), name(), options_.global_ranks);
  o.store_host = options_.store_host;
  o.raise_if_group_failed = [this](const std::function<std::vector<int>()>& missing) {
    raise_if_exchange_cannot_end(missing);
  };
  if (options_.store) {
    exchange_ = make_store_exchange(o, options_.store, store_prefix_ + "exchange/");
  } else {
    exchange_ = make_collective_exchange(o, [this](Tensor& out, const Tensor& in) { host_all_gather(out, in); });
  }
}

void ProcessGroup::raise_if_exchange_cannot_end(const std::function<std::vector<int>()>& missing_ranks) const {
  if (aborted_) throw PeerFailure("the group was aborted (ProcessGroup::abort) while it waited for ranks " +
                                  rank_list_text(missing_ranks()));
  // Not while the group is being created: its backends are not there yet (and such a call
  // waits as the creation does, init_wait.h).
  if (!backends_ || !options_.store) return;
  for (const auto& [device, backend] : backends_->all()) {
    PrefixStore board(backend_store_prefix(store_prefix_, device, backend.plugin), options_.store);
    const std::optional<FailureRecord> r = GroupFailure::read_record(board);
    if (!r) continue;
    const std::vector<int> missing = missing_ranks();
    if (std::find(missing.begin(), missing.end(), r->culprit) != missing.end()) {
      throw PeerFailure("rank " + std::to_string(r->culprit) + " will not come: the group failed (rank " +
                        std::to_string(r->rank) + " recorded: " + r->message + ")");
    }
  }
}

void ProcessGroup::host_all_gather(Tensor& out, const Tensor& in) {
  OpSpec spec;
  spec.type = OpType::kAllGather;
  spec.kind = OpKind::kInternal;
  spec.tensor = &in;
  spec.device = in.device().type;
  spec.timeout = options_.timeout;
  spec.description_suffix = " (host message exchange)";
  issue(spec, [&](Backend& b, const ReductionPlan&, const OpContext& ctx) {
    return b.all_gather(out, in, AllGatherOptions(), ctx);
  })->wait();
}

void ProcessGroup::create_recorder() {
  const TraceSettings& trace = options_.environment->trace;
  timeline_configure(trace.timeline_file, trace.run_id);
  size_t capacity = trace.buffer;
  // The timeline draws ops from the recorder as they end: it keeps a small one on.
  if (timeline_enabled()) capacity = std::max<size_t>(capacity, 64);
  if (capacity == 0) return;
  recorder_ = std::make_shared<FlightRecorder>(capacity);
  recorder_->set_failure_note([failure = core_failure_](const std::exception_ptr& error) { failure->note(error); });
  TraceGroupInfo info;
  info.name = name();
  info.rank = rank();
  info.size = size();
  info.global_ranks = options_.global_ranks;
  info.backend = spec_.text;
  for (const auto& [device, b] : backends_->all()) {
    std::string version = std::string(device_type_name(device)) + ": " + b.backend->name();
    try {
      version += " (" + load_plugin(b.backend->name(), plugins()).version + ")";
    } catch (const Error&) {
      // a backend whose name is not its plugin's: its name alone
    }
    info.versions.push_back(version);
  }
  recorder_->set_info(std::move(info));
  register_for_dumps(recorder_, trace);
}

ProcessGroup::~ProcessGroup() {
  if (in_fork_child()) {
    // The parent's backends, as the fork copied them: their threads are not here, and their
    // shutdown would tell the peers that this rank left (shm writes it into the shared
    // segments) while the parent goes on. Left as they are; the process's end frees them.
    (void)backends_.release();
    (void)exchange_.release();
    (void)detail_.release();
    return;
  }
  log_destroyed();
  // Destroyed while an exception propagates on this thread (a group held by a function the
  // program's error leaves): the peers are told that this rank's program is failing, before
  // the backends' close looks like an orderly leave to them.
  if (std::uncaught_exceptions() > 0 && options_.store && size() > 1 && backends_) {
    std::vector<std::string> boards;
    try {
      for (const auto& [device, backend] : backends_->all()) {
        boards.push_back(backend_store_prefix(store_prefix_, device, backend.plugin));
      }
    } catch (...) {
    }
    const std::string& prefix = checks_->where_prefix();  // "rank 1/4 group 'world' "
    leave_with_failing_program(options_.store, rank(), prefix.substr(0, prefix.size() - 1), boards);
  }
  const std::vector<uint64_t> not_ended = ops_not_ended();
  if (backends_) backends_->shutdown();  // none when the creation failed
  warn_of_ops_cut_off(not_ended);
  if (creation_keys_) {
    if (exchange_) {
      for (std::string& k : store_exchange_keys_left(*exchange_)) creation_keys_->more.push_back(std::move(k));
    }
    // Nothing of the group may write to the store after this rank counts itself out: its
    // parts go first, in the order the members' destruction would take them.
    recorder_.reset();
    detail_.reset();
    exchange_.reset();
    backends_.reset();
    release_creation_keys(*creation_keys_);
  }
}

void ProcessGroup::abort() {
  aborted_ = true;
  // In a fork child, the backends are the parent's: this copy is only marked (its ops are
  // refused anyway). Not thrown: abort is called from error handlers.
  if (in_fork_child()) return;
  backends_->abort();
}

uint64_t ProcessGroup::next_seq() const { return numbering_->next_seq(); }

int ProcessGroup::global_rank(int group_rank) const {
  if (group_rank < 0 || group_rank >= size()) {
    throw InvalidArgument("group '" + name() + "' has no rank " + std::to_string(group_rank));
  }
  return options_.global_ranks[static_cast<size_t>(group_rank)];
}

Backend& ProcessGroup::backend_for(DeviceType device) {
  if (in_fork_child()) refuse_in_fork_child(checks_->where_prefix() + "backend_for");
  return backends_->serving(device);
}

void ProcessGroup::refuse_if_fork_child(const char* what) const {
  if (in_fork_child()) refuse_in_fork_child(checks_->where_prefix() + what);
}

// ---------------------------------------------------------------------------------------
// Subgroups

std::shared_ptr<ProcessGroup> ProcessGroup::make_subgroup(const std::vector<int>& ranks, const std::string& backend,
                                                          const std::string& tag,
                                                          const InitWait* within, const MemberLists* lists) {
  const std::string text = backend.empty() ? options_.backend : backend;
  BackendSpec spec = BackendSpec::parse(text);
  const auto me = std::find(ranks.begin(), ranks.end(), rank());
  if (me == ranks.end()) {
    // What it passed, for any member that lists this rank: that member passed another list.
    if (lists) lists->post(*options_.store);
    skip_subgroup(*backends_, spec, ranks, plugins());
    return nullptr;
  }
  ProcessGroupOptions o = options_;
  o.rank = static_cast<int>(me - ranks.begin());
  o.size = static_cast<int>(ranks.size());
  o.group_name = subgroup_name(tag);
  o.backend = spec.text;  // in lower case, as parse gives it
  // Not the parent's own (init's, long past): a subgroup's creation counts from new_group,
  // or within the creation it is part of.
  o.creation_deadline = within ? within->deadline : std::chrono::steady_clock::time_point{};
  o.creation_timeout = within ? within->timeout : std::chrono::milliseconds::zero();
  o.global_ranks.clear();
  for (int r : ranks) o.global_ranks.push_back(global_rank(r));
  return build(std::move(o), std::move(spec), /*check_config=*/false, this, ranks, lists);
}

std::string ProcessGroup::subgroup_name(const std::string& tag) const {
  // store_prefix_ is "pg/<name>/" or "pg/<name>@<n>/" (GroupCreation::arrive); none
  // without a store, where creations are not counted.
  const std::string base = group_store_base(name());
  const bool counted = store_prefix_.size() > base.size() + 1 && store_prefix_.compare(0, base.size(), base) == 0 &&
                       store_prefix_[base.size()] == '@';
  const std::string path = counted ? store_prefix_.substr(3, store_prefix_.size() - 4) : name();
  return path + "/" + tag;
}

void ProcessGroup::leave_subgroup(const BackendSpec& spec) {
  try {
    skip_subgroup(*backends_, spec, {}, plugins());
  } catch (const Error&) {
    // The split itself failed, which the parent's backend has recorded as the parent's
    // failure (its next op says so); this rank's own refusal stays the error it reports.
  }
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks, const std::string& backend) {
  if (in_fork_child()) refuse_in_fork_child(checks_->where_prefix() + "new_group");
  // Counted on every rank, member or not, so all ranks agree on the next group's name.
  const uint64_t id = subgroups_++;
  const std::string call = "new_group #" + std::to_string(id) + " on group '" + name() + "'";
  const std::string key_prefix = store_prefix_ + "new_group/" + std::to_string(id) + "/";
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  std::string refusal;
  if (ranks.empty()) refusal = "'ranks' is empty";
  for (size_t i = 0; i < sorted.size() && refusal.empty(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= size()) {
      refusal = "rank " + std::to_string(sorted[i]) + " is outside [0, " + std::to_string(size()) + ")";
    } else if (i && sorted[i] == sorted[i - 1]) {
      refusal = "rank " + std::to_string(sorted[i]) + " is listed twice in " + rank_list_text(ranks);
    }
  }
  // The backend as the group would be made with it ("" is the parent's), which the members
  // compare with their lists: "GLOO" and "gloo" are one.
  std::optional<BackendSpec> spec;
  try {
    spec = BackendSpec::parse(backend.empty() ? options_.backend : backend);
  } catch (const InvalidArgument& e) {
    if (refusal.empty()) refusal = e.what();
  }
  const std::string backend_text = spec ? spec->text : backend;
  // Whatever its outcome, once this rank's call is over its keys (and the others') are
  // counted out; the last rank of this group deletes them (creation_keys.h).
  struct CallKeys {
    const ProcessGroup& parent;
    const std::string& key_prefix;
    std::string subgroup_base;
    ~CallKeys() {
      if (parent.options_.store) {
        release_new_group_call(parent.options_.store, key_prefix, parent.size(), subgroup_base);
      }
    }
  } call_keys{*this, key_prefix, group_store_base(subgroup_name("g" + std::to_string(id)))};
  // Its members wait for its list (member_lists.h), not in the host exchange.
  refuse_if_aborted(aborted_, checks_->where_prefix(), name(), call, [&](const std::string& why) {
    if (options_.store) MemberLists(call, key_prefix, sorted, rank(), backend_text).fail(*options_.store, why);
  });
  if (!refusal.empty()) {
    // Posted where the members it names look for its list (member_lists.h), so that they are
    // refused at once too, quoting it, rather than waiting out the timeout for this rank.
    if (options_.store) MemberLists(call, key_prefix, ranks, rank(), backend_text).refuse(*options_.store, refusal);
    // Members whose lists agree make their group all the same: where the parent's backend
    // splits it (NCCL), they wait in the split for this rank too. (A rank that cannot parse
    // its backend text asks no backend of the parent. Where ranks passed different backends,
    // they ask different backends of the parent, and no choice made here, without another
    // round, suits every one of them: a split may then wait for its timeout.)
    if (spec) leave_subgroup(*spec);
    throw InvalidArgument("new_group on group '" + name() + "': " + refusal);
  }
  const std::string tag = "g" + std::to_string(id);
  // The subgroup's name is the call's, whatever the list: its members compare their lists
  // as they arrive (member_lists.h), and stop waiting for one the parent knows is gone, as
  // its exchange does. Without a store there is nowhere to post them (docs/subgroups.md
  // says what happens then).
  if (!options_.store) return make_subgroup(sorted, backend, tag);
  const MemberLists lists(call, key_prefix, sorted, rank(), backend_text,
                          [this](const std::function<std::vector<int>()>& missing) {
    raise_if_exchange_cannot_end(missing);
  });
  return make_subgroup(sorted, backend, tag, nullptr, &lists);
}

void ProcessGroup::refuse_subgroup_if_aborted(const std::string& call) {
  refuse_if_aborted(aborted_, checks_->where_prefix(), name(), call,
                    [this](const std::string& why) { post_cannot_take_part(*exchange_, why); });
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
  refuse_if_fork_child("split");  // before its refusal below could post to the parent's exchange
  const uint64_t id = subgroups_++;
  const std::string call = "split #" + std::to_string(id) + " on group '" + name() + "'";
  refuse_subgroup_if_aborted(call);
  // One round: everyone learns everyone's (color, key).
  const auto all = all_gather_for(exchange(), call, std::to_string(color) + " " + std::to_string(key));
  if (color < 0) {
    skip_subgroup(*backends_, BackendSpec::parse(options_.backend), {}, plugins());
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

std::shared_ptr<ProcessGroup> ProcessGroup::split_group(const std::vector<std::vector<int>>& split_ranks,
                                                         const std::string& backend) {
  if (in_fork_child()) refuse_in_fork_child(checks_->where_prefix() + "split_group");
  const uint64_t id = subgroups_++;
  const std::string call = "split_group #" + std::to_string(id) + " on group '" + name() + "'";
  refuse_subgroup_if_aborted(call);
  agree_on_arguments(exchange(), call, split_ranks_error(split_ranks, size()),
                     "split_ranks " + split_ranks_text(split_ranks) + (backend.empty() ? "" : " backend " + backend));
  for (size_t k = 0; k < split_ranks.size(); ++k) {
    const auto& list = split_ranks[k];
    if (std::find(list.begin(), list.end(), rank()) != list.end()) {
      return make_subgroup(list, backend, "sg" + std::to_string(id) + "k" + std::to_string(k));
    }
  }
  return make_subgroup({}, backend, "sg" + std::to_string(id));  // in no list: gives the backends their part
}

}  // namespace distcomm
