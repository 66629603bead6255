#include "ft/liveness_monitor.h"

#include <algorithm>
#include <cstdio>

#include "api/errors.h"
#include "api/group/init_wait.h"
#include "api/logging.h"
#include "api/process/thread_start.h"
#include "ft/store_keys.h"

namespace distcomm {
namespace ft {

LivenessMonitor::LivenessMonitor(StorePtr store, std::string me, std::chrono::milliseconds interval,
                                 std::chrono::milliseconds heartbeat_timeout,
                                 std::chrono::milliseconds store_loss_timeout, std::vector<std::string> backends,
                                 std::function<void(const std::string&)> cut_off_store)
    : store_(std::move(store)),
      me_(std::move(me)),
      interval_(interval),
      heartbeat_timeout_(heartbeat_timeout),
      store_loss_timeout_(std::max(store_loss_timeout, heartbeat_timeout)),
      backends_(std::move(backends)),
      cut_off_store_(std::move(cut_off_store)),
      liveness_(store_, heartbeat_timeout) {
  last_beat_ = Clock::now();
  thread_ = start_thread("ft's liveness monitor (member " + me_ + ")", [this] { run(); });
}

LivenessMonitor::~LivenessMonitor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LivenessMonitor::watch(uint64_t generation, uint64_t step, std::vector<std::string> members,
                            ProcessGroupPtr group) {
  std::lock_guard<std::mutex> lock(mu_);
  watching_ = true;
  generation_ = generation;
  step_ = step;
  members_ = std::move(members);
  group_ = std::move(group);
  aborted_ = false;
  noticed_.reset();
}

void LivenessMonitor::unwatch() {
  std::lock_guard<std::mutex> lock(mu_);
  watching_ = false;
  group_.reset();
}

std::optional<LivenessMonitor::SystemTime> LivenessMonitor::noticed_abort() const {
  std::lock_guard<std::mutex> lock(mu_);
  return noticed_;
}

std::string LivenessMonitor::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void LivenessMonitor::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    // Nothing may escape this thread: a store that fails is remembered, and tried again.
    try {
      tick();
    } catch (const std::exception& e) {
      judge_own_silence(e.what());
    } catch (...) {
      judge_own_silence("a heartbeat threw a non-standard exception");
    }
    lock.lock();
    cv_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

std::string LivenessMonitor::fenced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fenced_;
}

std::string LivenessMonitor::lost_store() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_store_;
}

bool LivenessMonitor::aborted_for_waited_out_stall(const ProcessGroupPtr& group) const {
  std::lock_guard<std::mutex> lock(mu_);
  // owner_before both ways: the same control block (alive: `group` holds it), not merely the
  // same address. Still blind is not excluded: the caller got through to the store (its
  // verdict written) and the monitor's next beat may be an interval away; a member fenced
  // meanwhile finds its dead mark with the verdict, and one partitioned is left out of the
  // next generation, whatever its abort said.
  const bool same = group && !silence_aborted_.owner_before(group) && !group.owner_before(silence_aborted_);
  return same && fenced_.empty() && lost_store_.empty();
}

void LivenessMonitor::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
  watching_ = false;
  group_.reset();
}

std::string LivenessMonitor::silence_words(Clock::duration silent, const std::string& error) const {
  char took[96];
  std::snprintf(took, sizeof(took), "%.1f s (heartbeat timeout %.1f s; ", std::chrono::duration<double>(silent).count(),
                std::chrono::duration<double>(heartbeat_timeout_).count());
  return "ft: member '" + me_ + "': no heartbeat of it has reached the job's store for " + took +
         "its last store error: " + error + ")";
}

void LivenessMonitor::judge_own_silence(const std::string& error) {
  ProcessGroupPtr group;
  std::string line;
  bool lost = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = error;
    const Clock::duration silent = Clock::now() - last_beat_;
    // Not on a blip: only once the others' own bound has passed since the last beat that
    // reached the store, counted from when its add returned (the others count from when
    // they read that beat, at most one of their intervals later; a blocked add here fails
    // one interval plus its timeout after that return anyway). A shorter silence aborts
    // nothing: the others still count this member, and so does it.
    if (finished_ || !lost_store_.empty() || silent < heartbeat_timeout_) return;
    char waits[48];
    std::snprintf(waits, sizeof(waits), "%.1f s", std::chrono::duration<double>(store_loss_timeout_).count());
    if (silent >= store_loss_timeout_) {
      lost_store_ = silence_words(silent, error) + ", past the " + waits +
                    " it waits for the store (its recovery timeout): the members that still reach the store took it "
                    "for gone and fenced it long ago; it takes itself for lost, and its liveness monitor aborted "
                    "the step's group";
      line = lost_store_;
      lost = true;
    } else if (!blind_) {
      blind_ = true;
      if (group_) silence_aborted_ = group_;
      line = silence_words(silent, error) +
             ": the members that still reach the store, if any, take it for gone and fence it; its liveness monitor "
             "aborted the step's group, and it waits up to " + waits +
             " (its recovery timeout) for the store to answer: fenced, it ends then; if the store stalled for "
             "everyone, it goes on";
    } else {
      return;
    }
    group = group_;
  }
  log_line(line);
  // First: the abort's teardown then asks a store that fails at once.
  if (lost && cut_off_store_) {
    char waited[32];
    std::snprintf(waited, sizeof(waited), "%.1f s", std::chrono::duration<double>(store_loss_timeout_).count());
    cut_off_store_("ft member '" + me_ + "' takes itself for lost to the job's store (none of its heartbeats "
                   "reached it for " + waited + ")");
  }
  abort_group(group);
}

void LivenessMonitor::tick() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Lost: the others take it for gone, and a heartbeat now would only blur that.
    if (!lost_store_.empty()) return;
  }
  // Each call is bounded by the connection's timeout, heartbeat_timeout (the Manager's
  // root_store; a TCPStore's reconnect by 1 s at most), and the first that fails ends the
  // tick: a store that stops answering holds this thread, and the judging of its own
  // silence, about heartbeat_timeout at most.
  store_->add(keys::heartbeat(me_), 1);
  bool was_blind;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_blind = blind_;
    blind_ = false;
    last_beat_ = Clock::now();
    // The store answers again: an earlier error no longer explains anything (it was quoted
    // with every later failure, long after a 3 s stall had passed).
    last_error_.clear();
    if (!fenced_.empty() || finished_) return;
  }
  // Taken for gone by the others (it was stopped, or stalled past the heartbeat timeout): it
  // judges nobody any more (what it knew of their heartbeats is stale), and aborts its step's
  // group, so that an op of it ends now; the Manager ends with that (fenced()).
  if (store_->check({keys::dead(me_)})) {
    const std::string why = store_->get_string(keys::dead(me_));
    ProcessGroupPtr group;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fenced_ = why.empty() ? "no cause given" : why;
      group = group_;
    }
    abort_group(group);
    return;
  }
  if (was_blind) {
    log_line("ft: member '" + me_ + "' reaches the job's store again and finds no dead mark of its own: it goes on "
             "(the step its liveness monitor aborted is redone, unless every member had finished it)");
  }
  uint64_t g, s;
  std::vector<std::string> members;
  ProcessGroupPtr group;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!watching_) return;
    g = generation_;
    s = step_;
    members = members_;
    group = group_;
  }
  const auto mine = std::find(members.begin(), members.end(), me_);
  const std::string successor =
      members.size() < 2 || mine == members.end() ? "" : (mine + 1 == members.end() ? members.front() : *(mine + 1));
  std::string culprit, why;
  for (const std::string& id : members) {
    if (id == me_) continue;
    why = id == successor ? liveness_.gone(id) : liveness_.gone_here(id);
    if (!why.empty()) {
      culprit = id;
      break;
    }
  }
  if (!culprit.empty()) {
    const std::string what = "member " + culprit + " is gone: " + why;
    liveness_.fence(culprit, why);
    store_->compare_set(keys::verdict(g, s), {}, to_bytes("abort|" + what));
    // While the generation's group is being made (no group yet), its creation waits for
    // every member: say there that this one will not come, so the others' waits end within
    // the creation's check interval instead of at its deadline.
    if (!group) {
      const int rank = static_cast<int>(std::find(members.begin(), members.end(), culprit) - members.begin());
      const Store::Bytes failure = to_bytes(encode_creation_failure(rank, std::make_exception_ptr(PeerFailure(what))));
      const std::string group_prefix = keys::group_prefix(g) + "/" + group_store_base(keys::kGroupName) + "/";
      store_->compare_set(group_prefix + kCreationFailedKey, {}, failure);
      // And where each backend's rendezvous looks, for the members already past arrival.
      for (const std::string& plugin : backends_) {
        for (DeviceType device : {DeviceType::kCPU, DeviceType::kCUDA}) {
          store_->compare_set(backend_store_prefix(group_prefix, device, plugin) + "/" + kCreationFailedKey, {}, failure);
        }
      }
    }
  }
  // One request: a check then a get would block in the get (until the heartbeat timeout,
  // this monitor then taking itself for blind) where the generation's lowest member deleted
  // the verdict in between, its members two steps on (forgetting.h): a missing one is a step
  // left behind.
  const std::optional<Store::Bytes> read = read_present(*store_, {keys::verdict(g, s)}).front();
  if (!read || to_string(*read).rfind("abort|", 0) != 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The caller may have moved on meanwhile: only the step read above is aborted.
    if (aborted_ || !watching_ || generation_ != g || step_ != s) return;
    aborted_ = true;
    noticed_ = std::chrono::system_clock::now();
  }
  abort_group(group);
}

void LivenessMonitor::abort_group(const ProcessGroupPtr& group) {
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (group) group->abort();
}

}  // namespace ft
}  // namespace distcomm
