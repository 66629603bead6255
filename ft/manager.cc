#include "ft/manager.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "api/errors.h"
#include "api/group/process_environment.h"
#include "api/init.h"
#include "api/group/backend_spec.h"
#include "api/logging.h"
#include "api/store/prefix_store.h"
#include "api/store/tcp_store.h"
#include "ft/admission_wait.h"
#include "ft/forgetting.h"
#include "ft/ft_environment.h"
#include "ft/joiner_refusal.h"
#include "ft/liveness_monitor.h"
#include "ft/member_terms.h"
#include "ft/store_keys.h"
#include "ft/store_stall.h"

namespace distcomm {
namespace ft {
namespace {

using Clock = std::chrono::steady_clock;

// A commit's wait on the verdict, in slices: the caller's store connection is also the
// group's (its stall watch reads the store), and a wait holds it.
constexpr std::chrono::milliseconds kVerdictSlice{50};

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// The job's store from the environment, as a client. Nobody but the launcher (or ft_bench)
// should serve it, since it must outlive every member; when no launcher does, rank 0 of
// the first generation serves it, and says what that costs. Who serves it is read and
// checked by the core, as init_process_group reads it for env:// (api/init.h): a value init
// refuses is refused here in the same words, where ft's own comparison took it for "not
// the launcher".
std::function<StorePtr()> connect_from_environment(bool joining) {
  const LaunchEnv launch = read_launch_env();
  if (launch.master_addr.empty() || launch.master_port < 0) {
    throw InvalidArgument(
        "ft::Manager: MASTER_ADDR and MASTER_PORT are not set: start the job with tools/launch, or give "
        "ManagerOptions::connect");
  }
  const bool launcher_serves = store_served_by_launcher_from_environment();
  auto first = std::make_shared<bool>(true);
  return [launch, joining, launcher_serves, first]() -> StorePtr {
    TCPStoreOptions so;
    so.host = launch.master_addr;
    so.port = launch.master_port;
    so.identity = identity_from_environment();
    so.is_server = *first && !launcher_serves && !joining && launch.rank == 0;
    if (so.is_server) {
      log_line("ft: no launcher serves the job's store (DISTCOMM_STORE_SERVED_BY is unset or empty), so rank 0 "
                  "serves it: if rank 0 dies, the others cannot recover. Start the job with tools/launch.");
    }
    *first = false;
    return std::make_shared<TCPStore>(so);
  };
}

// The "ft/" keys over a new connection, every call bounded by `timeout`. Both get it: a
// PrefixStore's own timeout bounds only the waits it makes (get, wait), while add, check and
// compare_set go straight to the connection, which would otherwise wait its default (5
// minutes) for a server that does not answer -- the liveness monitor's heartbeat `add`
// among them (found by helper-57: a stopped store server then held the monitor, and a
// Manager's destructor, for 5 minutes).
StorePtr root_store(StorePtr connection, std::chrono::milliseconds timeout) {
  connection->set_timeout(timeout);
  auto root = std::make_shared<PrefixStore>(keys::kRoot, std::move(connection));
  root->set_timeout(timeout);
  return root;
}

// What the liveness monitor calls once this member takes itself for lost to the store:
// each TCP connection is cut off (TCPStore::cut_off), so that nothing of it waits for the
// silent store any more. Other stores (a FileStore, a test's) are left as they are.
std::function<void(const std::string&)> cut_off_connections(std::vector<StorePtr> connections) {
  return [connections = std::move(connections)](const std::string& why) {
    for (const StorePtr& c : connections) {
      if (auto* tcp = dynamic_cast<TCPStore*>(c.get())) tcp->cut_off(why);
    }
  };
}

// The first member a replacement stands for: "rank<R>" for the launcher's replacement ids
// "rank<R>+<n>" (api/process/rank_environment.h: the n-th replacement of rank R, started once
// the process before it has ended), "" for any other id.
std::string replaced_first_member(const std::string& id) {
  const size_t plus = id.find('+');
  const std::string rank = id.substr(0, plus), number = plus == std::string::npos ? "" : id.substr(plus + 1);
  auto digits = [](const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; };
  return rank.rfind("rank", 0) == 0 && digits(rank.substr(4)) && digits(number) ? rank : "";
}

// The state as the members must agree on it: every tensor's dtype, shape and device.
std::string describe_state(const std::vector<Tensor*>& state) {
  std::string s;
  for (const Tensor* t : state) s += (s.empty() ? "" : ", ") + t->describe();
  return s.empty() ? "(no tensors)" : s;
}

// Runs fn; a StoreError from it says that this member lost the job's store (helper-98: a
// member partitioned away ended with a bare "TCPStore: cannot connect to 10.100.0.1:29600
// after 1 s" after its step's Timeout, which said nothing of ft or of what follows).
template <typename Fn>
auto saying_the_store_was_lost(const std::string& id, const char* call, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const StoreError& e) {
    const bool ended = store_process_ended(e);
    std::rethrow_exception(with_detail(
        std::current_exception(),
        "ft: member '" + id + "' lost the job's store in " + call +
            (ended ? ": the store's host refuses connections, so the process that served the store (the launcher "
                     "of node 0, or rank 0) has exited or closed it; it ends here"
                   : ": it cannot learn the step's verdict nor its group's next generation, and the members that "
                     "still reach the store take it for gone once its heartbeat stops (a partition, or the store's "
                     "host down); it ends here")));
  }
}

// How long a store call of begin_step or commit is asked again through a stall of the store
// (store_stall.h): the monitor takes this member for lost once no beat got through for the
// recovery timeout; a heartbeat timeout more lets it say so first.
std::chrono::milliseconds stall_bound(const ManagerOptions& o) { return o.recovery_timeout + o.heartbeat_timeout; }

}  // namespace

StepKeepsFailing::~StepKeepsFailing() = default;

std::pair<int64_t, int64_t> shard(int64_t global, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size || global < 0) {
    throw InvalidArgument("ft::shard: rank " + std::to_string(rank) + " of " + std::to_string(size) + ", " +
                          std::to_string(global) + " samples");
  }
  const int64_t base = global / size, extra = global % size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

Manager::Manager(ManagerOptions options) : options_(std::move(options)) {
  // ft's edge: its variables read once, here (ft_environment.h), and nowhere else.
  const FtEnvironment environment = FtEnvironment::read();
  resolve_options(options_, environment);
  joining_ = *options_.joining;
  if (options_.initial_members < 0 && !joining_) options_.initial_members = read_launch_env().world_size;
  if (!joining_ && options_.initial_members < 1) {
    throw InvalidArgument("ft::Manager: the first generation's size is unknown: set WORLD_SIZE (tools/launch does) "
                          "or ManagerOptions::initial_members");
  }
  if (options_.heartbeat_interval <= std::chrono::milliseconds::zero() ||
      options_.heartbeat_interval * 2 > options_.heartbeat_timeout) {
    throw InvalidArgument("ft::Manager: heartbeat_interval (" + std::to_string(options_.heartbeat_interval.count()) +
                          " ms) must be positive and at most half of heartbeat_timeout (" +
                          std::to_string(options_.heartbeat_timeout.count()) + " ms)");
  }
  if (options_.report_interval <= std::chrono::milliseconds::zero()) {
    options_.report_interval = init_report_interval_from_environment();  // api/init.h: environment.cc reads it
  }
  if (options_.recovery_timeout <= std::chrono::milliseconds::zero() ||
      options_.op_timeout <= std::chrono::milliseconds::zero()) {
    throw InvalidArgument("ft::Manager: recovery_timeout and op_timeout must be positive");
  }
  if (options_.min_members < 1) {
    throw InvalidArgument("ft::Manager: min_members must be >= 1, got " + std::to_string(options_.min_members));
  }
  id_ = options_.member_id;
  if (id_.empty()) {
    // The host as the job names it (DISTCOMM_HOST_ID, where hosts share a kernel name).
    const std::string host_id = ProcessEnvironment::read().host_id;
    id_ = joining_ ? "joiner-" + std::to_string(::getpid()) + "@" + (host_id.empty() ? hostname() : host_id)
                   : "rank" + std::to_string(read_launch_env().rank);
  }
  if (id_.find_first_of(",|/") != std::string::npos || id_ == "rank-1") {
    throw InvalidArgument("ft::Manager: member id '" + id_ + "' is unset or holds ',', '|' or '/'");
  }
  if (!options_.connect) options_.connect = connect_from_environment(joining_);
  const StorePtr connection = options_.connect();
  store_ = root_store(connection, options_.op_timeout);
  liveness_ = std::make_unique<Liveness>(store_, options_.heartbeat_timeout);

  const MemberRecord me = MemberRecord::of_this_process(id_, options_.state_signature);
  const std::string written = to_string(store_->compare_set(keys::member(id_), {}, to_bytes(me.encode())));
  if (written != me.encode()) {
    const MemberRecord other = MemberRecord::decode(written);
    // A member taken for gone keeps its id for good (it is fenced: its verdict must hold if
    // it comes back), so a process started again under that id is refused too: say that,
    // rather than "taken" of a pid long dead.
    std::string gone;
    if (store_->check({keys::dead(id_)})) gone = store_->get_string(keys::dead(id_));
    if (!gone.empty()) {
      throw InvalidArgument("ft::Manager: member id '" + id_ + "' belonged to pid " + std::to_string(other.pid) +
                            ", which its group took for gone (" + gone +
                            "): a member id is never used again; start the new process with an id of its own "
                            "(DISTCOMM_FT_MEMBER_ID) as a joiner (DISTCOMM_FT_JOIN=1)");
    }
    throw InvalidArgument("ft::Manager: member id '" + id_ + "' is taken (by pid " + std::to_string(other.pid) +
                          "); give each process its own DISTCOMM_FT_MEMBER_ID");
  }
  // The heartbeat runs from here on: a joiner waiting to be taken in is alive too.
  // Its calls are short by design; a store that does not answer must not stop it for long.
  const StorePtr monitor_connection = options_.connect();
  StorePtr monitor_store = root_store(monitor_connection, options_.heartbeat_timeout);
  std::vector<std::string> backends;
  try {
    backends = BackendSpec::parse(options_.backend).names(PluginSearch::from_environment());
  } catch (const Error&) {
    // A spec it cannot read now fails the first group's creation, saying why.
  }
  monitor_ = std::make_unique<LivenessMonitor>(monitor_store, id_, options_.heartbeat_interval,
                                               options_.heartbeat_timeout, options_.recovery_timeout, backends,
                                               cut_off_connections({connection, monitor_connection}));
  if (joining_) {
    has_state_ = false;
    // A replacement of rank R is started once R's process has ended, so first member rank<R>
    // is gone. When it died before its Manager wrote its record (within its first moments),
    // nothing else can tell: it left no pid to look up and no heartbeat to stop, and the
    // first generation waits for a member that has not started until op_timeout (it may
    // start late), while this replacement waits for that generation below: a hang of
    // minutes (bug B7). Say it is gone, so that the first generation forms without it and
    // takes this one in at a step boundary. Not when its process lives on this host (then
    // this is not its replacement: liveness judges it as any member), and a record written
    // meanwhile is one that lives, so the record is looked for after its process.
    const std::string replaced = replaced_first_member(id_);
    if (!replaced.empty()) {
      std::string why = liveness_->gone_here(replaced);
      if (why.empty() && !store_->check({keys::member(replaced)})) {
        why = "it ended before its ft::Manager started (" + id_ + " was started to replace it)";
      }
      if (!why.empty()) liveness_->mark_dead(replaced, why);
    }
    // A joiner with other state is refused before it is counted in: the job goes on. The
    // members' state is known once the job's first generation stands: a joiner started
    // before it waits for it, or it would be counted in unchecked (and taken into a
    // generation whose state broadcast fails, one generation after another).
    // Saying every report interval what it waits for (admission_wait.h).
    await_first_generation(*store_, id_, options_.op_timeout, options_.report_interval);
    {
      const uint64_t latest = std::stoull(store_->get_string(keys::kLatest));
      const Generation current = Generation::decode(latest, store_->get_string(keys::members(latest)));
      if (!current.members.empty()) {
        const MemberRecord& first = liveness_->record(current.members.front(), std::chrono::seconds(5));
        if (first.signature != options_.state_signature) {
          liveness_->mark_dead(id_, std::string(kRefusedMark) + "its state differs from the members'");
          throw InvalidArgument("ft::Manager: joiner '" + id_ + "' refused: its state is '" + options_.state_signature +
                                "', the members' (" + first.id + ") is '" + first.signature + "'");
        }
      }
    }
    // Counted in as a joiner only when it comes to be taken in (form_next): one counted
    // here and slow to come would hold up the members' next generation.
  }
}

Manager::~Manager() {
  monitor_.reset();  // its thread first: it may hold the group
  group_.reset();
  retired_.reset();
}

ProcessGroupPtr Manager::begin_step(const std::vector<Tensor*>& state) {
  return saying_the_store_was_lost(id_, "begin_step", [&] { return begin_step_with_store(state); });
}

ProcessGroupPtr Manager::begin_step_with_store(const std::vector<Tensor*>& state) {
  group_changed_ = false;
  // The job stopped here: a program that calls on must not form another generation.
  if (!keeps_failing_.empty()) throw StepKeepsFailing(keeps_failing_);
  const std::string fenced = monitor_->fenced();
  if (!fenced.empty()) throw_taken_out(fenced);
  throw_if_store_lost();
  if (finished_) return nullptr;
  if (need_new_generation_ || !group_) form_next(state);
  return finished_ ? nullptr : group_;
}

void Manager::form_next(const std::vector<Tensor*>& state) {
  group_changed_ = true;
  monitor_->unwatch();
  const bool first = generation_.number == 0 && !joining_;
  const Clock::time_point deadline = Clock::now() + (first ? options_.op_timeout : options_.recovery_timeout);
  std::vector<std::string> previous = generation_.members;
  const std::vector<std::string> before = generation_.members;
  if (first) {
    for (int r = 0; r < options_.initial_members; ++r) previous.push_back("rank" + std::to_string(r));
  }
  agree_on_state(state);
  // How long a generation's group may take to stand before the generation is given up and
  // the next one formed (twice as long each time, never past the deadline): a member that
  // dies after it arrived at the generation (a second failure, during the recovery) never
  // arrives at the group. The monitor fails the creation when it sees that (a member on this
  // host, or its successor), and this slice is the bound when it cannot (a member elsewhere
  // that hangs). The next generation leaves out whoever is gone by then (liveness.h), and a
  // slow creation gets the time it needs. The first generation's ranks may start slowly: it
  // gets the whole deadline.
  std::chrono::milliseconds creation_slice = first ? options_.op_timeout : options_.heartbeat_timeout;
  std::vector<std::string> failed_members;  // of the last generation given up
  int same_failures = 0;                    // in a row, with those same members
  std::optional<Clock::duration> waited_for_joiners;  // by the generation short of members before
  for (;;) {
    // A Timeout here (this member's recovery timeout passed while forming) writes no stop
    // mark: it is this member's own clock, and the others, later deadlines of their own,
    // may still form the generation; a mark would turn away every later joiner of a job
    // that goes on (helper-192's review). Only store-agreed stops write it.
    const Generation next = agree_on_next(previous, deadline);
    if (next.members.empty()) {  // a joiner, and the training finished before it was taken in
      finished_ = true;
      return;
    }
    if (waited_for_joiners) log_joiners_taken_in(previous, next, *waited_for_joiners);
    waited_for_joiners.reset();
    if (static_cast<int>(next.members.size()) < options_.min_members) {
      // Too few to go on: no group is made for it. Every member of it does the same (the
      // launcher's words and the joiners are read from the store), then forms the next
      // generation with the joiners that came, within the same deadline. Polls of the
      // store: asked again whole through a stall (store_stall.h).
      waited_for_joiners =
          through_store_stall(*monitor_, stall_bound(options_), [&] { return await_replacements(next, deadline); });
      generation_ = next;
      committed_ = next.committed_steps;
      previous = next.members;
      continue;
    }
    generation_ = next;
    committed_ = next.committed_steps;
    previous = next.members;
    if (group_) retired_ = std::move(group_);
    const bool had_state = has_state_;
    try {
      make_group(std::min(deadline, Clock::now() + creation_slice));
      hand_state(state);
    } catch (const InvalidArgument& e) {
      // This program's mistake: another generation would repeat it.
      gave_up_forming(*store_, next, id_, e.what());
      throw;
    } catch (const Error& e) {
      has_state_ = had_state;
      // The members whose creation stood run this generation's first step: its verdict
      // "abort" makes their monitors end it, and they come to the next one too.
      const std::string abort = "abort|member '" + id_ + "' gave up forming " + next.describe() + ": " +
                                in_member_terms(e.what(), next.members);
      through_store_stall(*monitor_, stall_bound(options_), [&] {
        store_->compare_set(keys::verdict(next.number, next.committed_steps), {}, to_bytes(abort));
      });
      monitor_->unwatch();
      monitor_->abort_group(group_);  // the monitor may be aborting it too
      group_.reset();
      same_failures = next.members == failed_members ? same_failures + 1 : 1;
      failed_members = next.members;
      // Nobody is gone and the same members failed three times: what fails is not about
      // who is there, and another generation would fail the same way.
      if (Clock::now() >= deadline || same_failures >= 3) {
        // No stop mark of its own, as above: only this member counted these failures, and
        // the members whose creation stood may re-form without it. But once every member of
        // the generation has given up forming it, nobody is left to form another: the last
        // of them stops the job (gave_up_forming), so that no launcher replaces them into a
        // job that cannot go on (each joiner waited out its own recovery timeout, and was
        // replaced again up to --max_replacements on every machine).
        const std::string gave_up = "ft: member '" + id_ + "' gave up forming " + next.describe() + " (" +
                                    std::to_string(same_failures) + " times with these members)";
        gave_up_forming(*store_, next, id_, gave_up + ": " + in_member_terms(e.what(), next.members));
        std::rethrow_exception(with_detail(std::current_exception(), gave_up));
      }
      creation_slice = std::min<std::chrono::milliseconds>(
          creation_slice * 2, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      log_line("ft: member '" + id_ + "': " + next.describe() + " failed while forming (" +
               in_member_terms(e.what(), next.members) + "); forming the next");
      continue;
    }
    break;
  }
  // The last generation's group stays alive until this step's commit: the caller's DDP
  // still refers to it until it sees group_changed() and builds a new one.
  need_new_generation_ = false;
  steps_forgotten_ = generation_.committed_steps;
  monitor_->watch(generation_.number, committed_, generation_.members, group_);
  if (group_->rank() == 0) log_generation(before);
}

void Manager::agree_on_state(const std::vector<Tensor*>& state) {
  const std::string mine = describe_state(state);
  // Each store call asked again through a stall of the store (store_stall.h).
  auto ride = [this](auto&& call) { return through_store_stall(*monitor_, stall_bound(options_), call); };
  if (has_state_) {
    // The first member to form a generation says what the state is; every member must agree.
    const std::string job = ride([&] { return to_string(store_->compare_set(keys::kState, {}, to_bytes(mine))); });
    if (job != mine) {
      throw InvalidArgument("ft::Manager: member '" + id_ + "' has the state " + mine + ", the job's is " + job +
                            ": every member must pass begin_step the same tensors");
    }
    return;
  }
  if (generation_.number != 0) return;  // a joiner taken in before, whose transfer failed: checked then
  // A joiner: its state must be the members' (dtypes and shapes; the signature was checked
  // at construction), or it is refused before it is counted in, and the job goes on.
  const std::string job = ride([&] {
    store_->wait({keys::kState}, options_.op_timeout);
    return store_->get_string(keys::kState);
  });
  if (job != mine) {
    ride([&] { liveness_->mark_dead(id_, std::string(kRefusedMark) + "its state differs from the members'"); });
    throw InvalidArgument("ft::Manager: joiner '" + id_ + "' refused: its state is " + mine + ", the members' is " + job);
  }
  // A number asked again after a lost answer leaves the first one unwritten: waiting_joiners
  // skips it (counted, not yet written), and counts this joiner once, at its second.
  const int64_t n = ride([&] { return store_->add(keys::kJoiners, 1); });
  ride([&] { store_->set(keys::joiner(n), id_); });
}

Generation Manager::agree_on_next(const std::vector<std::string>& previous, Clock::time_point deadline) {
  // Each store call asked again through a stall of the store (store_stall.h); a forming whole,
  // by its own deadline: arriving again only adds a second arrival slot of the same id.
  auto ride = [this](auto&& call) { return through_store_stall(*monitor_, stall_bound(options_), call); };
  Generation next;
  if (generation_.number == 0 && joining_) {
    AdmissionRequest request{id_, deadline, Clock::now(), options_.report_interval};
    next = ride([&] { return await_admission(*store_, request); });
    if (next.members.empty()) return next;
  } else {
    FormRequest request;
    request.number = generation_.number + 1;
    request.me = id_;
    request.previous = previous;
    request.committed_steps = committed_;
    request.deadline = deadline;
    request.report_every = options_.report_interval;
    next = ride([&] { return form_generation(*store_, *liveness_, request); });
  }
  if (next.rank_of(id_) < 0) {
    const std::string why = ride([&] { return liveness_->gone(id_, false); });
    if (!why.empty()) throw Error(fenced_message(id_, why) + "; " + next.describe() + " was formed without it");
    throw PeerFailure("ft: member '" + id_ + "' was left out of " + next.describe() + ": it came too late");
  }
  // Fewer than min_members: form_next waits for the replacements due, or stops the job.
  if (!has_state_) ride([&] { store_->set(keys::needs_state(next.number, id_), "1"); });
  return next;
}

void Manager::make_group(Clock::time_point creation_deadline) {
  ProcessGroupOptions po;
  po.store = std::make_shared<PrefixStore>(keys::group_prefix(generation_.number), store_);
  po.rank = generation_.rank_of(id_);
  po.size = static_cast<int>(generation_.members.size());
  po.backend = options_.backend;
  // As init_process_group's: the launch environment's settings, and the address towards
  // MASTER_ADDR, so that a generation spanning hosts listens where its peers can reach it.
  po.backend_config = backend_config_as_init_gives(options_.backend, options_.backend_config);
  po.timeout = options_.op_timeout;
  po.group_name = keys::kGroupName;
  // A creation that waits for a member says so at the Manager's report interval, as its
  // forming does, not at the core's default.
  po.creation_report_every = options_.report_interval;
  po.creation_deadline = creation_deadline;
  // What a Timeout quotes: the slice this creation has, not the ops' timeout.
  po.creation_timeout = std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(
                                                                   creation_deadline - Clock::now()));
  po.store_text = "the fault-tolerant job's store (" + generation_.describe() + ")";
  // Watched while it is made: a member gone now fails the creation on every member
  // (liveness_monitor.h), well before the slice ends.
  monitor_->watch(generation_.number, generation_.committed_steps, generation_.members, nullptr);
  group_ = ProcessGroup::create(po);
  // Watched from here on, as a step is: a member that dies before the state has reached
  // the joiners gets the step's abort, and the broadcast ends now, not at op_timeout.
  monitor_->watch(generation_.number, generation_.committed_steps, generation_.members, group_);
}

void Manager::hand_state(const std::vector<Tensor*>& state) {
  // Creation waited for every member's arrival, and each that lacks the state said so
  // before arriving: every member sees the same list here.
  int root = -1;
  bool someone_needs = false;
  for (size_t r = 0; r < generation_.members.size(); ++r) {
    const bool needs = through_store_stall(*monitor_, stall_bound(options_), [&] {
      return store_->check({keys::needs_state(generation_.number, generation_.members[r])});
    });
    someone_needs = someone_needs || needs;
    if (!needs && root < 0) root = static_cast<int>(r);
  }
  if (!someone_needs) return;
  if (root < 0) throw Error("ft: no member of " + generation_.describe() + " has the state: every one that had it is gone");
  BroadcastOptions bo;
  bo.root = root;
  for (Tensor* t : state) group_->broadcast(*t, bo)->wait();
  has_state_ = true;
}

// One line per generation, from its rank 0: what changed, and why.
void Manager::log_generation(const std::vector<std::string>& before) const {
  std::string why;
  if (!failures_.empty() && failures_.back().recovered == std::chrono::system_clock::time_point{}) {
    const FailureEvent& f = failures_.back();
    const double after_s = std::chrono::duration<double>(std::chrono::system_clock::now() - f.noticed).count();
    char took[32];
    std::snprintf(took, sizeof(took), "%.2f", after_s);
    why = "; step " + std::to_string(f.step) + " of generation " + std::to_string(f.generation) + " failed (" + f.why +
          "), formed " + took + " s after this member learned it";
  }
  std::string joined, left;
  for (const std::string& id : generation_.members) {
    if (!before.empty() && std::find(before.begin(), before.end(), id) == before.end()) joined += " " + id;
  }
  for (const std::string& id : before) {
    if (generation_.rank_of(id) < 0) left += " " + id;
  }
  if (!left.empty()) why = "; without" + left + why;
  if (!joined.empty()) why = "; joined:" + joined + why;
  log_line_as(0, group_->size(),
              "ft: " + generation_.describe() + " goes on from step " + std::to_string(committed_) + why);
}

void Manager::finish() {
  // Training has ended here: the others may end their Managers (their heartbeats stop)
  // while this one lives on, and must not be taken for gone (fenced: killed) for that; nor
  // may the store's end (it ends with the job) abort anything here.
  monitor_->finish();
  if (!has_state_) return;  // a joiner never taken in has nothing to end
  // A compare_set: asked again through a stall of the store (store_stall.h), it finds its own
  // mark or another member's. The monitor judges nothing now, so the stall's bound decides.
  try {
    through_store_stall(*monitor_, stall_bound(options_), [&] {
      store_->compare_set(keys::kFinished, {}, to_bytes(std::to_string(committed_)));
    });
  } catch (const StoreError&) {
    std::rethrow_exception(with_detail(std::current_exception(),
                                       "ft: member '" + id_ + "' could not tell the job's store that training finished "
                                       "(a joiner still waiting to be taken in waits out its recovery timeout)"));
  }
}

void Manager::throw_if_store_lost() const {
  // The others take this member for gone (its monitor aborted its group): it ends here,
  // with the StoreError that begin_step and commit turn into "lost the job's store".
  const std::string lost = monitor_->lost_store();
  if (!lost.empty()) throw StoreError(lost);
}

void Manager::step_failed(const std::string& why) {
  if (!step_failed_) {
    step_failed_ = true;
    step_failure_ = why;
    step_failed_at_ = std::chrono::system_clock::now();
  }
}

bool Manager::commit() {
  if (!group_) throw InvalidArgument("ft::Manager::commit: no step under way (call begin_step first)");
  return saying_the_store_was_lost(id_, "commit", [&] {
    try {
      return commit_with_store();
    } catch (const Timeout& e) {
      // A store call of the commit that had no answer within the op timeout (its wait for
      // the verdict has its own deadline): the store is what it lost, said as such, not a
      // bare Timeout out of commit (where op_timeout < recovery_timeout, before the monitor
      // takes this member for lost).
      throw StoreError(e.what());
    }
  });
}

bool Manager::commit_with_store() {
  // Before any store call: the store does not answer this member, and each call would wait
  // the connection's timeout (op_timeout) to say so.
  if (!keeps_failing_.empty()) throw StepKeepsFailing(keeps_failing_);
  throw_if_store_lost();
  const uint64_t g = generation_.number, s = committed_;
  // Each store call is asked again through a stall of the store (store_stall.h), but for the
  // count of the step's finishers (below).
  auto ride = [this](auto&& call) { return through_store_stall(*monitor_, stall_bound(options_), call); };
  auto write_verdict = [&](const std::string& verdict) {
    ride([&] { store_->compare_set(keys::verdict(g, s), {}, to_bytes(verdict)); });
  };
  if (step_failed_) {
    // The group's ranks said as members (member_terms.h): the reporter is one too.
    // Failed for its group's abort by the monitor in a stall of the store, waited out: said so,
    // the step is not counted as failing (StepKeepsFailing, step_failures.cc). Asked once the
    // store answers (a read waits the stall out): a peer's monitor may have aborted first, and
    // this member's op failed for that before its own monitor judged the silence.
    ride([&] { return read_present(*store_, {keys::verdict(g, s)}); });
    const std::string stall = monitor_->aborted_for_waited_out_stall(group_) ? kStoreStallAbort : "";
    write_verdict("abort|" + stall + "member '" + id_ + "': " + in_member_terms(step_failure_, generation_.members));
  } else {
    int64_t done = 0;
    try {
      done = store_->add(keys::done(g, s), 1);
    } catch (const StoreError& e) {
      if (!store_may_answer_again(e)) throw;
      // No answer: the ADD may have been counted (its reply lost) or not (never sent). Asked
      // again, it could be counted twice, and the count reach the generation's size while a
      // member has not finished. The step is aborted instead, once the store answers: every
      // member redoes it (a "commit" written first, by a count this ADD completed, stands).
      write_verdict("abort|" + std::string(kStoreStallAbort) + "member '" + id_ +
                    "' finished the step, but the store did not answer its count (" +
                    e.what() + "): a store stall; the step is redone by every member");
    }
    if (done == static_cast<int64_t>(generation_.members.size())) {
      const bool grow = ride([&] {
        return !waiting_joiners(*store_, *liveness_, generation_.members, &joiners_resolved_below_).empty();
      });
      write_verdict(std::string("commit|") + (grow ? "grow" : ""));
    }
  }
  const Clock::time_point deadline = Clock::now() + options_.op_timeout;
  for (;;) {
    try {
      try {
        store_->wait({keys::verdict(g, s)}, kVerdictSlice);
        break;
      } catch (const StoreRefused&) {
        throw;  // another job's store: not a silence
      } catch (const StoreError& e) {
        // No answer, and the reconnect failed too: a store that stalled for everyone, or this
        // member cut off from it. The wait is asked again (it changes nothing) until the
        // monitor settles which (a beat gets through; or lost_store() past the recovery
        // timeout), as after a Timeout. A store whose host refuses connections has ended.
        if (store_process_ended(e)) throw;
        std::this_thread::sleep_for(kVerdictSlice);
        throw Timeout(e.what());
      }
    } catch (const Timeout&) {
      throw_if_store_lost();
      // Taken for gone (stopped past the heartbeat timeout, say): its dead mark is read below.
      // Its step's verdict may be gone too once the others went on (forget).
      if (!monitor_->fenced().empty()) break;
      if (Clock::now() >= deadline) {
        // Not on its own: the step is aborted for every member (unless a verdict came
        // meanwhile, which then stands), so that no member applies it while this one redoes it.
        write_verdict("abort|member '" + id_ + "' waited " + std::to_string(options_.op_timeout.count()) +
                      " ms for the others to finish the step");
        break;
      }
    }
  }
  // The verdict, and in the same request whether the others took this member for gone
  // meanwhile (it was stopped, say): then it ends here, whatever the verdict.
  const std::vector<std::optional<Store::Bytes>> read =
      ride([&] { return read_present(*store_, {keys::verdict(g, s), keys::dead(id_)}); });
  if (read[1]) {
    monitor_->abort_group(group_);
    throw_taken_out(to_string(*read[1]));
  }
  const std::string verdict =
      read[0] ? to_string(*read[0]) : ride([&] { return store_->get_string(keys::verdict(g, s)); });
  step_failed_ = false;
  retired_.reset();
  if (verdict.rfind("commit|", 0) == 0) {
    ++committed_;
    if (!failures_.empty() && failures_.back().recovered == std::chrono::system_clock::time_point{}) {
      failures_.back().recovered = std::chrono::system_clock::now();
    }
    if (verdict == "commit|grow") need_new_generation_ = true;
    monitor_->watch(g, committed_, generation_.members, group_);
    forget(s);
    return true;
  }
  FailureEvent event;
  event.generation = g;
  event.step = s;
  event.why = verdict.substr(verdict.find('|') + 1);
  // A monitor whose store calls fail sends no heartbeat either: say so with the failure.
  const std::string monitor_error = monitor_->last_error();
  if (!monitor_error.empty()) event.why += "; this member's liveness monitor's last store error: " + monitor_error;
  // Learned first by whichever came first: this member's own op failing, its monitor
  // seeing the verdict, or the verdict read here.
  event.noticed = std::chrono::system_clock::now();
  if (const auto seen = monitor_->noticed_abort()) event.noticed = std::min(event.noticed, *seen);
  if (step_failed_at_ != std::chrono::system_clock::time_point{}) event.noticed = std::min(event.noticed, step_failed_at_);
  step_failed_at_ = {};
  failures_.push_back(event);
  need_new_generation_ = true;
  monitor_->abort_group(group_);  // the monitor may be aborting it too
  // Reads, and marks written with compare_set: asked again whole through a stall.
  const std::string keeps = ride([&] { return keeps_failing(s, verdict.substr(verdict.find('|') + 1)); });
  if (!keeps.empty()) {
    keeps_failing_ = keeps;
    // Every other member reads the same records and ends here too: none of them is to be
    // taken for gone (and fenced) because its heartbeat stops once it has ended.
    monitor_->finish();
    throw StepKeepsFailing(keeps);
  }
  return false;
}

void Manager::throw_taken_out(const std::string& mark) {
  // Refused (its step failed wherever it was, joiner_refusal.h): it ends as the members would
  // have had it not been refused, saying why, and every later call says it again.
  if (mark.rfind(kRefusedMark, 0) == 0) {
    keeps_failing_ = refused_message(id_, mark);
    monitor_->finish();
    throw StepKeepsFailing(keeps_failing_);
  }
  throw Error(fenced_message(id_, mark));
}

void Manager::forget(uint64_t s) {
  if (generation_.members.empty() || generation_.members.front() != id_) return;
  // The steps before s-1. Step s's verdict "commit" says that every member of this
  // generation added itself to s's count, which it does only after its commit of s-1 read
  // s-1's verdict and returned: no member's commit reads s-1's keys, or older ones, again.
  // A commit that asks its verdict again after a StoreError (44efa8d) asks its own step's,
  // which the others cannot commit past without it. s-1 is kept all the same: a liveness
  // monitor's tick reads the step it watches, then makes store calls before it may write
  // "abort" there; one that began before its member left s-1 would write a verdict again
  // that nobody reads (a key left for good) only if it lags two steps now, not one.
  if (s >= 1) steps_forgotten_ = forget_steps(*store_, generation_.number, steps_forgotten_, s - 1);
  // The generations before the last one, at this one's first commit: every member of this
  // one has arrived, made its group and ended its forming, so reads no older generation's
  // keys; every member of an older one not in this one was taken for gone (its dead mark
  // written when it was left out), and one that runs again ends at its dead mark (the
  // verdict wait above breaks for it). The last one stays a generation longer: its verdict
  // says why it ended, and a joiner or a fenced member one generation behind still finds
  // it. The members records stay: see forgetting.h.
  if (s == generation_.committed_steps && generation_.number > 1) {
    forget_generations(*store_, generation_.number - 1);
  }
}

}  // namespace ft
}  // namespace distcomm
