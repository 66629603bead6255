#include "backends/shm/shm_rendezvous.h"

#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <sstream>

#include "api/group/auto_backend.h"
#include "api/group/process_environment.h"
#include "api/errors.h"
#include "api/diagnostics/op_fingerprint.h"
#include "api/group/init_wait.h"
#include "api/group/sliced_store_wait.h"
#include "backends/shm/shm_cpus.h"
#include "api/plugin/process_watch.h"
#include "backends/shm/shm_populate_budget.h"
#include "backends/shm/shm_segment.h"

namespace distcomm {
namespace shm {
namespace {

// What a rank publishes about its segment, one field per line.
struct SegmentAddress {
  std::string domain;     // shared_memory_domain()
  std::string host;       // hostname, for messages
  int pid = -1;           // getpid(): what pidfd_open takes (the ranks share a PID namespace)
  int proc_pid = -1;      // the pid /proc numbers it by, for /proc/<pid>/fd
  int fd = -1;
  size_t bytes = 0;
  uint64_t nonce = 0;
  std::string cpus;       // allowed_cpus_text(): the CPUs this rank may run on
  std::string settings;   // ShmConfig::shared_signature()
  // DISTCOMM_HOST_ID ("" when unset), as auto and hier read it (ProcessEnvironment): ranks
  // whose ids differ count as on different hosts and never share memory. Last, so that an
  // address without it (an older plugin's) reads as unset.
  std::string host_id;

  std::string encode() const {
    std::ostringstream out;
    out << "shm-segment-v2\n" << domain << "\n" << host << "\n" << pid << "\n" << proc_pid << "\n" << fd << "\n"
        << bytes << "\n" << nonce << "\n" << cpus << "\n" << settings << "\n" << host_id;
    return out.str();
  }
  static SegmentAddress decode(const std::string& text, int rank) {
    std::istringstream in(text);
    std::string magic, line;
    SegmentAddress a;
    std::getline(in, magic);
    std::getline(in, a.domain);
    std::getline(in, a.host);
    in >> a.pid >> a.proc_pid >> a.fd >> a.bytes >> a.nonce;
    std::getline(in, line);  // end of the nonce's line
    std::getline(in, a.cpus);
    std::getline(in, a.settings);
    std::getline(in, a.host_id);
    if (magic != "shm-segment-v2" || (!in.good() && !in.eof())) {
      throw BackendUnavailable("shm: rank " + std::to_string(rank) + " published an unreadable segment address");
    }
    return a;
  }
};

std::string key_of(int rank) { return "shm/segment/" + std::to_string(rank); }
std::string mapped_key_of(int rank) { return "shm/mapped/" + std::to_string(rank); }
// Where the first rank that cannot join says why, so the others stop waiting for it.
const char kErrorKey[] = "shm/error";

std::vector<std::string> keys_for(int size, std::string (*key)(int)) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(key(r));
  return keys;
}

// Throws when a rank that has not reached the wait can no longer reach it (it died).
using PeerCheck = std::function<void(int rank)>;

// The ranks whose keys do not exist yet: one request (read_present), not a check per key,
// which at 96 ranks made every look of every rank 96 round trips to one store server.
std::vector<int> missing_ranks(Store& store, const std::vector<std::string>& keys) {
  const std::vector<std::optional<Store::Bytes>> values = read_present(store, keys);
  std::vector<int> missing;
  for (size_t r = 0; r < values.size(); ++r) {
    if (!values[r]) missing.push_back(static_cast<int>(r));
  }
  return missing;
}

// Waits until every key exists, or a rank has published why it cannot join, or the
// group's creation deadline (what init left of it, init_wait.h), saying whom it waits for.
// check_missing, when given, is asked about each missing rank at every look.
// The wait is the store's own (WAIT_FOR, answered when the last key comes), not sleeps
// between checks: on a host with more ranks than cores a sleeping poller woke up to 50 ms
// after the last rank had come, and every look cost every rank a request or more. It is cut
// into SlicedStoreWait's slices (kWaitSlice), and the look follows every slice that ended
// without the keys: how late this rank learns of a failure (the error key, a dead peer).
void wait_for_keys(Store& store, const std::vector<std::string>& keys, const BackendOptions& o, const InitWait& w,
                   const std::string& what, const PeerCheck& check_missing = nullptr) {
  SlicedStoreWait wait(store, keys, "the shm rendezvous's keys " + what);
  wait.look_every(std::chrono::milliseconds::zero(), [&] {
    // Before the error key: a rank that sees the death itself reports it as such, not as
    // another rank's report of it.
    if (check_missing) {
      for (int r : missing_ranks(store, keys)) check_missing(r);
    }
    if (store.check({kErrorKey})) {
      throw BackendUnavailable("shm: group '" + o.group_name + "' cannot be created: " + store.get_string(kErrorKey));
    }
  });
  w.until(
      what, [&](std::chrono::milliseconds slice) { return wait.wait_until(std::chrono::steady_clock::now() + slice); },
      [&] { return missing_ranks(store, keys); }, "they have not reached the shm rendezvous, or are stuck or gone");
}

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

uint64_t fresh_nonce() {
  std::random_device rd;
  const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return (static_cast<uint64_t>(rd()) << 32 ^ rd()) ^ t ^ static_cast<uint64_t>(::getpid()) << 16;
}

// The peers' collective areas (control lines and slots) mapped in at creation, at most: a
// small group's first ops then take no page faults, and a large one's processes map in only
// what its ops touch (else every process of 64 ranks would hold all 64 ranks' slots,
// 256 MiB with the default 4 x 1 MiB).
constexpr size_t kPeerPopulateBudget = size_t{64} << 20;
// How long a rank whose segment could not be opened may take to be seen ended (its files
// close early in its exit): only on that error's path.
constexpr std::chrono::milliseconds kExitingPeerGrace{500};

// Refuses a peer this rank cannot share memory with, or whose settings differ.
void check_peer_address(const SegmentAddress& a, int peer, const SegmentAddress& mine, const BackendOptions& o) {
  // Before the kernel's word: a host id is the user's statement that the ranks are on
  // different hosts (containers that share a kernel), as auto and hier take it.
  if (a.host_id != mine.host_id) {
    auto id = [](const std::string& h) { return h.empty() ? std::string("unset") : "'" + h + "'"; };
    throw BackendUnavailable("shm: every rank of group '" + o.group_name +
                             "' must run on one host, and ranks with different DISTCOMM_HOST_IDs count as on "
                             "different hosts (they never share memory): rank " + std::to_string(peer) +
                             " has DISTCOMM_HOST_ID " + id(a.host_id) + ", this rank (" + std::to_string(o.rank) +
                             ") " + id(mine.host_id) + ". Use backend gloo, or auto to choose by placement");
  }
  if (a.domain != mine.domain) {
    throw BackendUnavailable("shm: every rank of group '" + o.group_name +
                             "' must run on this host, in one PID namespace: rank " + std::to_string(peer) +
                             " runs on host '" + a.host + "', this rank (" + std::to_string(o.rank) + ") on '" +
                             mine.host + "' (boot id and PID namespace: '" + a.domain + "' vs '" + mine.domain +
                             "'). Use backend gloo, or auto to choose by placement");
  }
  if (a.settings != mine.settings) {
    throw InvalidArgument("shm: rank " + std::to_string(peer) + " of group '" + o.group_name +
                          "' has other shm settings than this rank (" + std::to_string(o.rank) + "): '" + a.settings +
                          "' vs '" + mine.settings + "'; give every rank the same shm_* config");
  }
}

Segment open_and_check(const SegmentAddress& a, int peer, size_t populate, int group_size) {
  Segment s = Segment::open_peer(a.proc_pid, a.fd, a.bytes, populate, group_size);
  const SegmentHeader& h = reinterpret_cast<const ControlBlock*>(s.base())->header;
  if (h.magic != kSegmentMagic || h.nonce != a.nonce || h.rank != peer || h.version != kLayoutVersion) {
    throw BackendUnavailable("shm: the segment at /proc/" + std::to_string(a.proc_pid) + "/fd/" +
                             std::to_string(a.fd) + " is not rank " + std::to_string(peer) +
                             "'s (did that rank exit or create the group twice?)");
  }
  return s;
}

PeerFailure died_while_created(const BackendOptions& o, int rank, int pid, const std::string& when) {
  return PeerFailure("shm: rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") died while group '" +
                     o.group_name + "' was being created, " + when);
}

std::unique_ptr<MappedGroup> map_group(const BackendOptions& o, const ShmConfig& config) {
  Layout layout(o.size, config);
  SegmentAddress mine;
  mine.domain = shared_memory_domain();
  mine.host = hostname();
  mine.pid = ::getpid();
  mine.proc_pid = proc_self_pid();
  if (mine.proc_pid < 0) throw BackendUnavailable("shm: /proc/self is not readable, so peers cannot map this rank's segment");
  mine.bytes = layout.total_bytes();
  mine.nonce = fresh_nonce();
  mine.cpus = allowed_cpus_text();
  mine.settings = config.shared_signature();
  mine.host_id = ProcessEnvironment::read().host_id;

  // This rank writes its collective area at every op: populated now, and its peers' too
  // where they fit kPeerPopulateBudget, while the process's live groups stay within
  // PopulateCharge's budget (else its own alone, or none of it: lazily). The rings never are: a ring's memory
  // comes with its pair's first transfer (n^2 rings of ~132 KiB would be 528 MiB for 64
  // ranks of a host).
  // With more ranks than the host has cores, none of it: every rank's population then runs
  // on cores shared by all the group's ranks, so its cost adds up across them (8 ranks
  // each mapping in 7 peers' 4 MiB made a split of 64 ranks into 8 groups take ~2.7 s on 2
  // cores, ~0.8 s without, gloo ~0.9 s), while a first op's faults are small beside the
  // waits for a core such a host has anyway. Ops then fault in only what they touch.
  // Counted as the spin policy counts (shm_cpus.h): the host's ranks, not this group's alone
  // (32 groups of 2 on 2 cores), against the CPUs this process may use (usable_cpus()): its
  // affinity mask, not the host's CPUs (a container's cpuset narrows it), capped by its cgroup
  // CPU quota (a Kubernetes CPU limit). The peers' masks are not known yet here: ranks pinned
  // one to a core each are taken for oversubscribed, and populate lazily.
  // The quota is read once per creation (a host of 20,000 mounts makes mountinfo long):
  // here, and kept in the group for the wait policy (shm_engine.cc).
  CpuQuota quota = cgroup_cpu_quota();
  const bool crowded = oversubscribed(o.size, config.local_world_size, usable_cpus(quota.cpus));
  const size_t peers_area = layout.rings_offset() * static_cast<size_t>(o.size - 1);
  const size_t peer_part = peers_area <= kPeerPopulateBudget ? layout.rings_offset() : 0;
  // Past the budget for all of that, this rank's own area alone (the one it writes at every
  // op), if that fits.
  size_t populate_peer = peer_part;
  PopulateCharge populated;
  if (!crowded) {
    populated = PopulateCharge::take(layout.rings_offset() + peer_part * static_cast<size_t>(o.size - 1));
    if (!populated.granted() && peer_part > 0) {
      populated = PopulateCharge::take(layout.rings_offset());
      populate_peer = 0;
    }
  }
  const size_t populate_own = populated.granted() ? layout.rings_offset() : 0;
  if (!populated.granted()) populate_peer = 0;
  Segment own = Segment::create("distcomm-shm-" + o.group_name + "-rank" + std::to_string(o.rank), mine.bytes,
                                populate_own, o.size);
  mine.fd = own.fd();
  SegmentView(own.base(), &layout).initialize(o.rank, ::getpid(), mine.nonce);
  o.store->set(key_of(o.rank), mine.encode());
  const std::string where = group_rank_text(o.rank, o.size, o.group_name, o.global_ranks) + " (shm)";
  const InitWait wait = InitWait::for_backend(o.config, o.timeout, where, o.global_ranks, o.store.get());
  wait_for_keys(*o.store, keys_for(o.size, key_of), o, wait, "to publish their shm segments");

  std::vector<Segment> segments(static_cast<size_t>(o.size));
  std::vector<int> pids(static_cast<size_t>(o.size), -1);
  std::vector<ProcessWatch> watches(static_cast<size_t>(o.size));
  std::vector<std::string> masks{mine.cpus};
  // Every rank's address in one request, not one get per peer (n(n-1) requests a group).
  const std::vector<std::optional<Store::Bytes>> addresses = read_present(*o.store, keys_for(o.size, key_of));
  for (int r = 0; r < o.size; ++r) {
    if (r == o.rank) continue;
    const std::optional<Store::Bytes>& published = addresses[static_cast<size_t>(r)];
    // Keys are never deleted while the group is made: absent means a store that lost it.
    if (!published) throw BackendUnavailable("shm: rank " + std::to_string(r) + "'s segment address has gone from the store");
    const SegmentAddress a = SegmentAddress::decode(to_string(*published), r);
    // The watch first: the segment opened next (its nonce checked) proves that this pid
    // was its owner's while watched.
    check_peer_address(a, r, mine, o);
    ProcessWatch& watch = watches[static_cast<size_t>(r)];
    watch = ProcessWatch(a.pid);
    try {
      segments[static_cast<size_t>(r)] = open_and_check(a, r, populate_peer, o.size);
    } catch (const BackendUnavailable&) {
      // Its memfd may be gone because it is exiting: then the kernel says so within moments.
      if (watch.ends_within(kExitingPeerGrace)) {
        throw died_while_created(o, r, a.proc_pid, "before this rank could map its segment");
      }
      throw;
    }
    pids[static_cast<size_t>(r)] = a.proc_pid;
    masks.push_back(a.cpus);
  }
  segments[static_cast<size_t>(o.rank)] = std::move(own);
  pids[static_cast<size_t>(o.rank)] = mine.proc_pid;
  auto group = std::make_unique<MappedGroup>(o.rank, layout, std::move(segments), std::move(pids), std::move(watches),
                                             cpus_in_union(masks), std::move(quota), std::move(populated));
  // Nobody leaves before everyone has mapped everyone: a rank that destroyed the group at
  // once would otherwise close its memfd before a slower peer opened it. A rank that dies
  // meanwhile is named at once (its segment is mapped here, so its process is watched).
  o.store->set(mapped_key_of(o.rank), "1");
  wait_for_keys(*o.store, keys_for(o.size, mapped_key_of), o, wait, "to map every rank's shm segment", [&](int r) {
    if (!group->alive(r)) throw died_while_created(o, r, group->pid(r), "after it had published its segment");
  });
  return group;
}

}  // namespace

std::unique_ptr<MappedGroup> join_group(const BackendOptions& o, const ShmConfig& config) {
  try {
    return map_group(o, config);
  } catch (const std::exception& e) {
    // First reason wins; the others' waits end with it instead of their timeout.
    const std::string reason = "rank " + std::to_string(o.rank) + ": " + e.what();
    try {
      o.store->compare_set(kErrorKey, {}, to_bytes(reason));
    } catch (const std::exception&) {
      // The store itself failed: the others find out through their own waits.
    }
    throw;
  }
}

}  // namespace shm
}  // namespace distcomm
