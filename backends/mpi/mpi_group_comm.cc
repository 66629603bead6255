#include "backends/mpi/mpi_group_comm.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "api/errors.h"
#include "backends/mpi/mpi_types.h"

namespace distcomm {
namespace mpi {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// A waiting thread tests the arrival messages back to back (yielding the core between
// tests) for kSpinFor, then sleeps between tests, from kFirstNap up to kLongestNap: members
// that arrive together meet within microseconds, and one that is late costs a test every
// 2 ms, not a busy core.
constexpr microseconds kSpinFor{1000};
constexpr microseconds kFirstNap{50};
constexpr microseconds kLongestNap{2000};

// The same on every member, and distinct between groups that a process may be creating
// at the same time (one per thread): both the arrival messages' tag and
// MPI_Comm_create_group's.
int creation_tag(const std::string& group_name, int tag_upper_bound) {
  return static_cast<int>(std::hash<std::string>()(group_name) % (static_cast<uint64_t>(tag_upper_bound) + 1));
}

void check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) std::rethrow_exception(error_from(what, rc));
}

// Step 1 (mpi_group_comm.h): the zero-byte messages of one member to and from the others.
// Its MPI calls run wherever the runtime runs setup calls (run_setup), one at a time.
class Arrival {
 public:
  Arrival(MPI_Comm comm, const GroupCommSpec& spec, int tag) : comm_(comm), spec_(spec), tag_(tag) {
    for (int r = 0; r < static_cast<int>(spec.world_ranks.size()); ++r) {
      if (r != spec.rank) peers_.push_back(r);
    }
    recvs_.assign(peers_.size(), MPI_REQUEST_NULL);
    sends_.assign(peers_.size(), MPI_REQUEST_NULL);
    arrived_.assign(peers_.size(), false);
  }

  // Receives first: a member whose message came has posted its receive from this one.
  void post() {
    for (size_t i = 0; i < peers_.size(); ++i) {
      check(MPI_Irecv(nullptr, 0, MPI_BYTE, world_rank(i), tag_, comm_, &recvs_[i]), what("MPI_Irecv"));
    }
    for (size_t i = 0; i < peers_.size(); ++i) {
      check(MPI_Isend(nullptr, 0, MPI_BYTE, world_rank(i), tag_, comm_, &sends_[i]), what("MPI_Isend"));
    }
  }

  // Whether every other member's message has come.
  bool test() {
    int count = 0;
    indices_.resize(recvs_.size());
    check(MPI_Testsome(static_cast<int>(recvs_.size()), recvs_.data(), &count, indices_.data(), MPI_STATUSES_IGNORE),
          what("MPI_Testsome"));
    if (count == MPI_UNDEFINED) return true;  // no receive left
    for (int k = 0; k < count; ++k) arrived_[static_cast<size_t>(indices_[static_cast<size_t>(k)])] = true;
    return std::all_of(arrived_.begin(), arrived_.end(), [](bool a) { return a; });
  }

  // The group ranks whose message has not come.
  std::vector<int> missing() const {
    std::vector<int> out;
    for (size_t i = 0; i < peers_.size(); ++i) {
      if (!arrived_[i]) out.push_back(peers_[i]);
    }
    return out;
  }

  // Leaves nothing posted: cancels the receives still waiting and lets the sends complete
  // by themselves (zero bytes go eagerly: they complete whether or not a peer receives).
  void release() noexcept {
    for (MPI_Request& r : recvs_) {
      if (r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    for (MPI_Request& r : sends_) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
  }

 private:
  int world_rank(size_t i) const { return spec_.world_ranks[static_cast<size_t>(peers_[i])]; }
  std::string what(const char* call) const {
    return "mpi backend: " + std::string(call) + " of the arrival step creating group '" + spec_.group_name + "'";
  }

  MPI_Comm comm_;
  const GroupCommSpec& spec_;
  int tag_;
  std::vector<int> peers_;  // group ranks, this one left out
  std::vector<MPI_Request> recvs_, sends_;
  std::vector<bool> arrived_;
  std::vector<int> indices_;
};

// The arrival wait of a subgroup whose parent this rank shut down: said as gloo's and a
// store's waits say it (ProcessGroup::abort), naming the members that had not come.
std::exception_ptr parent_shut_down_error(const GroupCommSpec& spec, const InitWait& wait, const Arrival& arrival) {
  std::string ranks;
  for (int r : arrival.missing()) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return std::make_exception_ptr(PeerFailure(
      wait.where + ": the parent group '" + spec.parent_name +
      "' was aborted (ProcessGroup::abort) or destroyed on this rank while it waited for ranks [" + ranks +
      "] to arrive at the creation of the group's MPI communicator"));
}

void wait_for_members(Runtime& runtime, const GroupCommSpec& spec, int tag, const InitWait& wait) {
  Arrival arrival(runtime.arrival_comm(), spec, tag);
  runtime.run_setup([&] { arrival.post(); });
  try {
    wait.until(
        "to arrive at the creation of the group's MPI communicator",
        [&](milliseconds slice) {
          const auto start = std::chrono::steady_clock::now();
          const auto end = start + slice;
          microseconds nap = kFirstNap;
          for (;;) {
            bool done = false;
            runtime.run_setup([&] { done = arrival.test(); });
            if (done) return true;
            if (spec.parent_shut_down && spec.parent_shut_down()) {
              std::rethrow_exception(parent_shut_down_error(spec, wait, arrival));
            }
            const auto now = std::chrono::steady_clock::now();
            if (now >= end) return false;
            if (now - start < kSpinFor) {
              std::this_thread::yield();
              continue;
            }
            std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(nap, end - now));
            nap = std::min(nap * 2, kLongestNap);
          }
        },
        [&] { return arrival.missing(); },
        "they have not called new_group (or init_process_group) for this group yet, or are stuck or gone");
  } catch (...) {
    runtime.run_setup([&] { arrival.release(); });
    throw;
  }
  runtime.run_setup([&] { arrival.release(); });
}

}  // namespace

bool is_world_in_order(const std::vector<int>& world_ranks, int world_size) {
  if (world_ranks.empty()) return true;
  if (static_cast<int>(world_ranks.size()) != world_size) return false;
  for (size_t i = 0; i < world_ranks.size(); ++i) {
    if (world_ranks[i] != static_cast<int>(i)) return false;
  }
  return true;
}

MPI_Comm create_group_comm(Runtime& runtime, const GroupCommSpec& spec, const InitWait& wait) {
  const int tag = creation_tag(spec.group_name, runtime.tag_upper_bound());
  const bool several = spec.world_ranks.size() > 1;
  if (several) wait_for_members(runtime, spec, tag, wait);

  // Owned with the call, which may outlive this function (Runtime::run_setup_within).
  struct Result {
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = MPI_SUCCESS;
  };
  auto result = std::make_shared<Result>();
  const bool dup = is_world_in_order(spec.world_ranks, runtime.world_size());
  auto create = [result, dup, ranks = spec.world_ranks, tag] {
    if (dup) {
      result->rc = MPI_Comm_dup(MPI_COMM_WORLD, &result->comm);
    } else {
      MPI_Group world_group, group;
      MPI_Comm_group(MPI_COMM_WORLD, &world_group);
      MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group);
      result->rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &result->comm);
      MPI_Group_free(&group);
      MPI_Group_free(&world_group);
    }
    if (result->rc == MPI_SUCCESS) MPI_Comm_set_errhandler(result->comm, MPI_ERRORS_RETURN);
  };
  if (several) {
    runtime.run_setup_within(
        create, [result] { if (result->comm != MPI_COMM_NULL) MPI_Comm_free(&result->comm); }, wait,
        std::string("to create the group's MPI communicator (") + (dup ? "MPI_Comm_dup" : "MPI_Comm_create_group") +
            ", which every member had arrived at)",
        "every member's arrival message had come, so one has given up since (at its deadline, or before this rank "
        "came, on an earlier try at this group: its message stays), or is stuck or gone");
  } else {
    runtime.run_setup(create);
  }
  check(result->rc, "mpi backend: creating the communicator of group '" + spec.group_name + "'");
  return result->comm;
}

}  // namespace mpi
}  // namespace distcomm
