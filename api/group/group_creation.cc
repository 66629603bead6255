#include "api/group/group_creation.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "api/diagnostics/group_failure.h"
#include "api/diagnostics/op_fingerprint.h"
#include "api/errors.h"
#include "api/group/auto_backend.h"
#include "api/group/auto_shm_fit.h"
#include "api/group/creation_keys.h"
#include "api/logging.h"
#include "api/plugin/plugin_registry.h"
#include "api/process/job_identity.h"
#include "api/store/internal/call_deadline.h"
#include "api/store/internal/store_host.h"
#include "api/store/prefix_store.h"

namespace distcomm {
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

std::string where_of(const ProcessGroupOptions& o) {
  return group_rank_text(o.rank, o.size, o.group_name, o.global_ranks);
}

// The n-th creation's prefix of a group whose keys are under `base` (group_store_base).
std::string creation_prefix(const std::string& base, int64_t n) {
  return n == 1 ? base + "/" : base + "@" + std::to_string(n) + "/";
}

// Which process holds a rank of a group (GroupCreation::claim_rank), kept under
// "<base>/process/<rank>" as "<creation> <size> <host>:<pid> <word>": the creation it made
// last and that group's size, the process as messages name it, and a random word drawn
// once per process, so that processes of one pid on hosts of one name (containers) are
// still told apart. The pid is asked each time: a child forked after the word was drawn
// has the word, not the pid.
struct RankClaim {
  int64_t creation = 0;
  int size = 0;
  std::string process;  // "<host>:<pid>"
  std::string word;

  static RankClaim of_this_process(int64_t creation, int size) {
    static const std::string word = [] {
      try {
        return hex_of(random_bytes(8));
      } catch (const std::exception&) {
        return std::string("-");  // host and pid alone, then
      }
    }();
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') host[0] = '?';
    return {creation, size, std::string(host) + ":" + std::to_string(::getpid()), word};
  }
  std::string encode() const {
    return std::to_string(creation) + " " + std::to_string(size) + " " + process + " " + word;
  }
  static std::optional<RankClaim> decode(const std::string& value) {
    std::istringstream in(value);
    RankClaim c;
    if (!(in >> c.creation >> c.size >> c.process >> c.word) || c.creation < 1 || c.size < 1) return std::nullopt;
    return c;
  }
  bool same_process(const RankClaim& o) const { return process == o.process && word == o.word; }
};

// What a rank's arrival key holds: the backend it asked for, as the ranks compare it (a
// device list in device order, so "cpu:gloo,cuda:nccl" and "cuda:nccl,cpu:gloo" agree; a
// single name as given: "auto" and "cpu:auto" differ, the first may add nccl).
const std::string kArrivalBackend = "backend=";
std::string arrival_value(const BackendSpec& spec) {
  if (spec.text.find(':') == std::string::npos) return kArrivalBackend + spec.text;
  std::string list;
  for (const auto& [device, name] : spec.by_device) {
    list += (list.empty() ? "" : ",") + std::string(device_type_name(device)) + ":" + name;
  }
  return kArrivalBackend + list;
}

enum class CreationState { kArriving, kFailed, kArrived };

// Where the creation under `prefix` stands: a rank of it has said that it failed; else
// every one of the `size` has arrived, or not yet.
CreationState creation_state(Store& store, const std::string& prefix, int size) {
  if (store.check({prefix + kCreationFailedKey})) return CreationState::kFailed;
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(prefix + "arrived/" + std::to_string(r));
  return store.check(keys) ? CreationState::kArrived : CreationState::kArriving;
}

// Whether the process of a claim ("<host>:<pid>") runs on this host, as far as this process
// can tell: the same host name and a live pid. (A container of the same name with its own
// pids could show another process under that pid: only ever a warning.)
bool runs_here(const RankClaim& claim) {
  const RankClaim mine = RankClaim::of_this_process(1, 1);
  const size_t colon = claim.process.rfind(':');
  if (colon == std::string::npos || claim.process.substr(0, colon) != mine.process.substr(0, mine.process.rfind(':'))) {
    return false;
  }
  const long pid = std::strtol(claim.process.c_str() + colon + 1, nullptr, 10);
  if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) return false;
  // A rank that died and is not reaped yet (its launcher is about to start the replacement
  // this may be) is a zombie: "Z" after the name in /proc/<pid>/stat.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t name_end = text.rfind(')');
  return name_end == std::string::npos || name_end + 2 >= text.size() || text[name_end + 2] != 'Z';
}

}  // namespace

GroupCreation::GroupCreation(const ProcessGroupOptions& options, BackendSpec spec, const MemberLists* lists)
    : options_(options),
      spec_(std::move(spec)),
      lists_(lists),
      where_(where_of(options)),
      wait_(InitWait::starting_now(options.timeout, options.creation_report_every, where_)) {
  if (options_.creation_timeout > std::chrono::milliseconds::zero()) wait_.timeout = options_.creation_timeout;
  if (options_.creation_deadline != InitWait::Clock::time_point{}) {
    wait_.deadline = options_.creation_deadline;
    // Waited since the deadline's start (init's own, before its store), not since this
    // object: "init timed out after 2.1 s (the group's timeout is 4.0 s)" was said after 4.7 s.
    wait_.started = std::min(wait_.started, wait_.deadline - wait_.timeout);
  }
  wait_.global_ranks = options_.global_ranks;
}

std::string backend_store_prefix(const std::string& group_prefix, DeviceType device, const std::string& plugin) {
  return group_prefix + device_type_name(device) + "/" + plugin;
}

void GroupCreation::arrive() {
  Store& store = *options_.store;
  const std::string base = group_store_base(options_.group_name);
  // Each rank counts its own creations of this name: the n-th one of every rank is the
  // same group. new_group's members meet first, where ranks of another list are refused
  // (member_lists.h), and take their leader's count: ranks of disjoint lists, which share
  // the name, each take their own group's.
  int64_t n = 0;
  wait_.store_host = options_.store_host;
  try {
    n = lists_ ? lists_->meet(store, base, options_.rank, wait_, options_.store_text) : count_creation(store, base);
  } catch (const InvalidArgument&) {
    list_refused_ = lists_ != nullptr;  // meet's only InvalidArgument: a list refused
    throw;
  } catch (const internal::StoreCallCutShort& e) {
    // The count or the rank claim (calls that wait for nobody) got no answer by the
    // creation's store deadline: said as init's timeout, naming the store.
    wait_.raise_store_did_not_answer("the store to count this creation (" + options_.store_text + ")", e);
  }
  store_prefix_ = creation_prefix(base, n);
  // From here on a rank that fails tells the others (confirm), and every wait of theirs,
  // this one first, ends as soon as it sees that.
  wait_.failure_store = options_.store.get();
  wait_.failure_key = store_prefix_ + kCreationFailedKey;
  // Every rank arrives before any backend waits for it (each in its own way, few of which
  // can say whom they wait for): one that never comes is named here.
  // (new_group's meeting was its arrival.)
  if (!lists_ && options_.size > 1) {
    wait_for_arrivals(store, store_prefix_, options_.rank, options_.size, wait_, options_.store_text, duplicate_hint_,
                      arrival_value(spec_));
    check_same_backend_as_rank_0(store);
  }
}

void GroupCreation::check_same_backend_as_rank_0(Store& store) const {
  // Ranks that asked for different backends (DISTCOMM_BACKEND set for some ranks only) would
  // each wait in their own backend's rendezvous until the timeout, 30 minutes by default,
  // and then blame each other as stuck. Every rank's arrival holds its backend: one read of
  // rank 0's, once all have come, finds it here; this rank's refusal (confirm) then ends
  // rank 0's wait too, with these words. (new_group compares its members' in its meeting.)
  if (options_.rank == 0) return;
  std::string first;
  try {
    internal::StoreCallDeadline bounded(wait_.store_calls_deadline(), "the creation of " + where_);
    first = to_string(store.get(store_prefix_ + "arrived/0"));
  } catch (const internal::StoreCallCutShort& e) {
    wait_.raise_store_did_not_answer("the store to read rank 0's backend (" + options_.store_text + ")", e);
  }
  // An arrival without a backend (a core from before it held one) says nothing to compare.
  if (first.compare(0, kArrivalBackend.size(), kArrivalBackend) != 0) return;
  const std::string mine = arrival_value(spec_);
  if (first == mine) return;
  // A rank 0 that failed first is the cause, whatever it asked for.
  wait_.raise_if_creation_failed([&] { return where_ + ": init compared its backend with rank 0's"; });
  throw InvalidArgument(where_ + ": rank " + std::to_string(options_.rank) + " asked for backend '" +
                        mine.substr(kArrivalBackend.size()) + "', rank 0 for '" + first.substr(kArrivalBackend.size()) +
                        "'; every rank must ask for the same (at init: InitOptions.backend, DISTCOMM_BACKEND or the "
                        "launcher's --backend)");
}

int64_t GroupCreation::count_creation(Store& store, const std::string& base) {
  // These calls wait for nobody, so they end by the creation's deadline too (and a little
  // slack, InitWait::store_calls_deadline): a shrink given 10 s whose store's server is
  // stopped fails in about 12 s, not in the store's timeout (the group's, 30 minutes).
  internal::StoreCallDeadline bounded(wait_.store_calls_deadline(), "the creation of " + where_);
  const int64_t n = store.add(base + "/made_by/" + std::to_string(options_.rank), 1);
  if (options_.size > 1) claim_rank(store, base, n);
  return n;
}

void GroupCreation::claim_rank(Store& store, const std::string& base, int64_t n) {
  const std::string key = base + "/process/" + std::to_string(options_.rank);
  const RankClaim mine = RankClaim::of_this_process(n, options_.size);
  const std::string wanted = mine.encode();
  std::string expected;  // no claim yet
  // A few turns: another process may take a claim that is over at the same time as this one.
  for (int turn = 0; turn < 8; ++turn) {
    const std::string held = to_string(store.compare_set(key, to_bytes(expected), to_bytes(wanted)));
    if (held == wanted) return;
    const std::optional<RankClaim> other = RankClaim::decode(held);
    const CreationState state = other && !other->same_process(mine)
                                    ? creation_state(store, creation_prefix(base, other->creation), other->size)
                                    : CreationState::kFailed;
    if (state == CreationState::kArriving) {
      // Two processes arriving as the same rank: each counted its own creation of the group
      // (made_by), so the other ranks wait under one prefix for a rank that went to another.
      // Said where both creations' ranks wait, this one's own too (the other process may
      // have counted second), so that every rank ends now, quoting this.
      const InvalidArgument error(where_ + ": rank " + std::to_string(options_.rank) + " was started twice: by " +
                                  other->process + " and " + mine.process + "; every process needs its own RANK");
      const std::string record = encode_creation_failure(options_.rank, std::make_exception_ptr(error));
      for (const int64_t c : {other->creation, n}) {
        try {
          store.compare_set(creation_prefix(base, c) + kCreationFailedKey, {}, to_bytes(record));
        } catch (const Error&) {
          // The store has gone: this rank's own error says it.
        }
      }
      throw error;
    }
    // This process's own claim of an earlier creation, or one whose creation is over (it
    // failed, or every rank arrived: another job over the same store, or a rank a later
    // creation gives to another process): this creation takes it. But where every rank
    // of it arrived and its process still runs here, this may be a second process started
    // with that rank after the first had joined its group: nothing here can tell (the
    // other may be done with that group), so it is said at once and in a Timeout, while
    // this process waits for ranks that, then, never come.
    if (state == CreationState::kArrived && duplicate_hint_.empty() && runs_here(*other)) {
      const std::string r = std::to_string(options_.rank);
      duplicate_hint_ = "rank " + r + " of group '" + options_.group_name + "' is already held by process " +
                        other->process + ", which joined the group with every other rank and still runs: if it is " +
                        "still in the job, this process is a second rank " + r +
                        " and waits for ranks that never come (every process needs its own RANK)";
      log_line("warning: " + duplicate_hint_);
    }
    expected = held;
  }
}

namespace {

// A backend setting's value, or `otherwise` where the group has none.
std::string config_value(const std::map<std::string, std::string>& config, const std::string& key,
                         const std::string& otherwise) {
  const auto it = config.find(key);
  return it == config.end() || it->second.empty() ? otherwise : it->second;
}

}  // namespace

GroupBackends GroupCreation::make_backends(const GroupBackends* parent, const std::vector<int>& members,
                                           HostExchange* exchange) {
  const PluginSearch& plugins = options_.environment->plugins;
  std::map<DeviceType, std::string> plan = spec_.plan(plugins);
  // Decided before "auto" is resolved below, as the parent's ranks outside this subgroup
  // decide it (skip_subgroup): every rank of the parent must ask the same backends.
  const std::map<DeviceType, Backend*> reused =
      parent ? reusable_backends(*parent, spec_, plugins) : std::map<DeviceType, Backend*>{};
  auto cpu = plan.find(DeviceType::kCPU);
  std::string why_no_nccl;
  if (cpu != plan.end() && (cpu->second == "auto" || cpu->second == "hier")) {
    if (!exchange) {
      throw InvalidArgument("backend '" + cpu->second + "' needs a store shared by the ranks (env://, tcp:// or file://)");
    }
    // Only "auto" alone may add nccl, so only it asks whether this rank can run it.
    const bool plan_has_cuda = plan.count(DeviceType::kCUDA) > 0;
    const bool ask_nccl = spec_.text == "auto" && !plan_has_cuda;
    // Only a rank mpirun started can run mpi across hosts (and only then is the mpi plugin,
    // and with it libmpi, loaded to ask), and only in the world group: MPI starts with the
    // whole job, so a subgroup whose members started it alone, in a world that is not mpi,
    // would wait for the others until its deadline.
    const std::string across = config_value(options_.backend_config, "hier_across", "gloo");
    check_hier_across(where_, across);  // before the exchange: refused before anything is sent
    const bool ask_mpi = across != "gloo" && parent == nullptr &&
                         config_value(options_.backend_config, "launcher", "") == "mpirun";
    // shm is judged for this group's shm level and settings (a rank's segment grows with
    // its group, and must fit ulimit -f): across hosts that level is this host's ranks only,
    // as many as the launcher's local world size at most (shm_ranks_to_judge).
    const int local_world_size = std::atoi(config_value(options_.backend_config, "local_world_size", "0").c_str());
    const int shm_size = shm_ranks_to_judge(cpu->second, options_.size, local_world_size);
    const std::string placement = auto_backend_placement_for_group(plugins, options_.environment->host_id, ask_nccl,
                                                                   ask_mpi, across, shm_size, options_.backend_config);
    std::vector<std::string> placements;
    {
      // Within the creation's deadline, ending when another rank's part fails (host_exchange.cc).
      const BackendCreationScope creating(wait_);
      placements = exchange->all_gather(placement, "the auto backend's placements");
    }
    const ExchangedPlacements exchanged = split_placements(placements);
    placements_ = exchanged.cpu;
    if (cpu->second == "auto") {
      const AutoChoice choice = choose_auto(spec_.text, plan_has_cuda, exchanged);
      cpu->second = choice.cpu;
      if (choice.with_nccl) plan[DeviceType::kCUDA] = "nccl";
      if (ask_nccl && !choice.with_nccl) why_no_nccl = why_auto_left_out_nccl(exchanged, options_.rank, plugins);
      spec_.text += choice.label;
    } else {
      const std::string why_not = why_not_hierarchical(placements_);
      // Within one host, where every rank can run shm (else why_not says which cannot), the
      // hierarchy's own level is the whole group: shm, as docs/many-hosts.md's table says
      // (a DeviceMesh's intra-host groups of a hier world went over gloo on loopback).
      // Across hosts, the flat group runs on the backend the hierarchy would use across hosts
      // (docs/many-hosts.md: under mpirun with hier_across = mpi, mpi is also its flat
      // backend): an explicit mpi is honoured, or refused naming the rank that cannot run it
      // (choose_across_backend), never replaced by gloo in silence; one rank per host is
      // where every op crosses hosts, so where the request matters most.
      const std::string flat =
          why_not == "one host" ? "shm" : choose_across_backend(where_, parent == nullptr ? across : "gloo", exchanged);
      cpu->second = why_not.empty() ? "hier" : flat;
      if (!why_not.empty()) spec_.text += " (cpu: " + flat + ", flat: " + why_not + ")";
    }
    // The hierarchy's flat backend: every op it does not run by hosts, and its fault
    // handling, are its backend across hosts' (gloo, or mpi under mpirun). Its groups within
    // and across hosts are made after this, still inside the group's creation
    // (ProcessGroup::make_levels, before confirm).
    hierarchical_ = cpu->second == "hier";
    // A subgroup goes over gloo across hosts whatever the setting says (ask_mpi above); the
    // ranks must still agree on it.
    if (hierarchical_) {
      cpu->second = across_backend_ = choose_across_backend(where_, parent == nullptr ? across : "gloo", exchanged);
    }
  }
  GroupBackends backends("group '" + options_.group_name + "' (backend '" + spec_.text + "')");
  // Why "auto" alone left nccl out, for the CUDA ops that then fail (as a mixed spec keeps
  // its unavailable nccl's reason): known only here, from the exchanged placements.
  if (!why_no_nccl.empty()) backends.add_left_out(DeviceType::kCUDA, why_no_nccl);
  const bool several = plan.size() > 1;
  for (const auto& [device, name] : plan) {
    BackendOptions bo;
    if (options_.store) {
      // Remembering what the backend writes, for the group's end (creation_keys.h).
      auto recording =
          std::make_shared<RecordingPrefixStore>(backend_store_prefix(store_prefix_, device, name), options_.store);
      backend_stores_.push_back(recording);
      bo.store = recording;
    }
    bo.rank = options_.rank;
    bo.size = options_.size;
    bo.global_ranks = options_.global_ranks;
    bo.group_name = options_.group_name;
    bo.timeout = options_.timeout;
    bo.device = device;
    bo.config = options_.backend_config;
    // The group's DISTCOMM_DEBUG level, where it is not OFF, for a plugin's own INFO lines
    // (shm says how its waiters wait).
    if (options_.debug != DebugLevel::kOff) bo.config["debug"] = debug_level_name(options_.debug);
    try {
      // The backend's rendezvous waits within what is left of the creation's deadline.
      const BackendCreationScope creating(wait_);
      GroupBackend made;
      auto from = reused.find(device);
      if (from != reused.end()) {
        try {
          made.backend.reset(from->second->create_subgroup_backend(&bo, members));
        } catch (...) {
          // Said as an error of create() is (create_backend): with this rank, group and backend.
          std::rethrow_exception(backend_creation_error(std::current_exception(), name, bo,
                                                        load_plugin(name, plugins).path));
        }
      }
      if (!made.backend) made.backend = create_backend(name, bo, plugins);
      made.plugin = name;
      made.abi_minor = load_plugin(name, plugins).abi_minor;
      made.supported_ops = made.backend->supported_ops();
      if (made.abi_minor >= 6) made.list_ops = made.backend->list_ops();
      backends.add(device, std::move(made));
    } catch (const BackendUnavailable& e) {
      // Alone, a backend that cannot run here fails the group now.
      if (!several) throw;
      backends.add_unavailable(device, e.what());
    } catch (const InvalidArgument& e) {
      // A plugin checks its settings' values when it is made ("shm_slots='1': expected an
      // integer in [2, 64]"): say which rank, group and backend, as every other refusal does.
      if (std::string(e.what()).rfind("rank ", 0) == 0) throw;
      throw InvalidArgument(where_ + " (" + name + "): " + e.what());
    }
  }
  return backends;
}

void GroupCreation::confirm(const std::exception_ptr& failure) {
  if (options_.size == 1) return;
  Store& store = *options_.store;
  const std::string prefix = where_ + " ";
  auto key = [&](int r) { return store_prefix_ + "created/" + std::to_string(r); };
  // The first rank to fail says so here; a rank failing after it (often because of it: the
  // first one left, so its connections were refused) reports that first failure.
  const std::string first_key = store_prefix_ + kCreationFailedKey;
  if (failure) {
    const std::string mine = encode_creation_failure(options_.rank, failure);
    std::string first;
    try {
      store.set(key(options_.rank), mine);
      first = to_string(store.compare_set(first_key, {}, to_bytes(mine)));
      // Also where each backend's rendezvous looks (InitWait::for_backend), so that the
      // others' backends stop waiting for this rank.
      for (const std::string& backend : spec_.names(options_.environment->plugins)) {
        for (DeviceType device : {DeviceType::kCPU, DeviceType::kCUDA}) {
          store.compare_set(backend_store_prefix(store_prefix_, device, backend) + "/" + kCreationFailedKey, {},
                            to_bytes(first));
        }
      }
    } catch (const Error&) {
      return;  // the store is gone too; this rank's own failure says more
    }
    // This rank may serve the store: the others read the failure there before it goes.
    internal::note_failure_for_peers();
    // This rank's backend may have said its failure already (InitWait::say_creation_failed,
    // before closing its connections): a record of this rank's is its own, not an earlier one.
    const std::optional<FailureRecord> record = FailureRecord::decode(first);
    const bool own = first == mine || (record && record->rank == options_.rank);
    const CreationFailure earlier = CreationFailure::decode(first, options_.global_ranks);
    if (!own && may_be_consequence(failure, earlier.text)) {
      earlier.raise(prefix + "creation failed first on " + earlier.text + " -- and then here: rank " +
                    std::to_string(options_.rank) + ": " + message_of(failure));
    }
    return;  // this rank throws its own
  }
  store.set(key(options_.rank), std::string("ok"));
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (int r = 0; r < options_.size; ++r) {
    keys.push_back(key(r));
    ranks.push_back(r);
  }
  wait_for_keys(store, keys, ranks, wait_, "to finish creating the group's backends",
                "they are still in (or stuck in) their backends' rendezvous");
  for (int r = 0; r < options_.size; ++r) {
    const std::string said = store.get_string(keys[static_cast<size_t>(r)]);
    if (said == "ok") continue;
    const CreationFailure first = CreationFailure::decode(store.check({first_key}) ? store.get_string(first_key) : said,
                                                             options_.global_ranks);
    first.raise(prefix + "creation failed on " + first.text + "; the group is unusable here too");
  }
}

std::exception_ptr GroupCreation::with_store_host(const std::exception_ptr& failure) const {
  if (options_.store_host.empty()) return failure;
  try {
    std::rethrow_exception(failure);
  } catch (const StoreError& e) {
    return internal::store_lost(e, e.what(), options_.store_host);
  } catch (...) {
    return failure;
  }
}

std::map<DeviceType, Backend*> reusable_backends(const GroupBackends& parent, const BackendSpec& spec,
                                                 const PluginSearch& plugins) {
  std::map<DeviceType, Backend*> out;
  for (const auto& [device, name] : spec.plan(plugins)) {
    const GroupBackend* mine = parent.find(device);
    if (!mine || mine->plugin != name || mine->abi_minor < 4) continue;
    out[device] = mine->backend.get();
  }
  return out;
}

void skip_subgroup(const GroupBackends& parent, const BackendSpec& spec, const std::vector<int>& members,
                   const PluginSearch& plugins) {
  for (const auto& [device, backend] : reusable_backends(parent, spec, plugins)) {
    // A backend that breaks the rule and makes one anyway gets it deleted here.
    std::unique_ptr<Backend> none(backend->create_subgroup_backend(nullptr, members));
  }
}

}  // namespace distcomm
