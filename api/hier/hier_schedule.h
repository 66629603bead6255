// The schedules of a hierarchical group's ops (api/hierarchical_backend.h): how each op runs
// as ops of the group's levels, the shm group of this rank's host ("within") and the gloo
// (or mpi) group of its local rank over the hosts ("across"). One file per op (hier_<op>.cc); this
// header is what they share: where the ranks sit, the op's deadline, memory kept from op to
// op, the pieces of a pipeline, and the waits that keep an op's memory until its parts end.
//
// Every schedule runs on the backend's thread, one op at a time, in the group's issue
// order, and every rank issues its levels' ops in one order that depends only on the
// layout and the op's arguments, so that each level's ops match. Hosts of one size take
// the path where every local rank's link works (shares of the op, one per local rank);
// hosts of different sizes go through each host's local rank 0 (the one local rank every
// host has), whose group across holds every host.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "api/group/host_layout.h"
#include "api/process_group.h"
#include "api/tensor.h"
#include "api/work.h"

namespace distcomm {
namespace hier {

using Clock = std::chrono::steady_clock;

// The group's levels and where this rank sits in them.
struct Levels {
  ProcessGroupPtr within;  // this rank's host (shm); its ranks in local-rank order
  ProcessGroupPtr across;  // this rank's local rank on every host that has one, in host order
  HostLayout hosts;
  int rank = 0;   // this rank, in the group
  int host = 0;   // this rank's host
  int local = 0;  // this rank's local rank

  bool even() const { return hosts.even(); }
  // Whether the group across holds another host (it always does for local rank 0).
  bool across_others() const { return across && across->size() > 1; }
  int host_count() const { return static_cast<int>(hosts.hosts.size()); }
  int local_count(int host) const { return static_cast<int>(hosts.hosts[static_cast<size_t>(host)].size()); }
  int largest_host() const;
  // The group rank of local rank `local` of host `host`.
  int rank_at(int host, int local) const { return hosts.hosts[static_cast<size_t>(host)][static_cast<size_t>(local)]; }
  // f(i, rank) for every rank of the group in (local rank, host) order, i its index in that
  // order (hosts of one size): the order in which an all_gather within the host, of what
  // each local rank gathered across, holds the group's blocks.
  template <typename F>
  void by_local_rank(F f) const {
    int i = 0;
    for (int l = 0; l < local_count(0); ++l) {
      for (int h = 0; h < host_count(); ++h) f(i++, rank_at(h, l));
    }
  }
  int host_of(int rank) const { return hosts.host_of[static_cast<size_t>(rank)]; }
  int local_of(int rank) const { return hosts.local_rank_of[static_cast<size_t>(rank)]; }
};

// Memory kept from op to op (only the thread runs ops, one at a time): fresh pages cost a
// fault each on first touch (a 64 MiB op: 16K faults, more time than the copy), so each use
// keeps one buffer, grown as needed. kWhole: the size of the op's largest tensor (a padded
// copy, a permuted one); kPart: a smaller one (a share, what crosses hosts); kSpare: a
// result a rank has no use for (reduce's, beside its root).
class Scratch {
 public:
  enum Use { kWhole, kPart, kSpare, kUses };
  // `count` elements of `dtype` over the use's buffer (contents undefined).
  Tensor get(Use use, int64_t count, DType dtype);

 private:
  Tensor kept_[kUses];
};

// One op's run: its levels, its scratch, and the time it has left.
struct OpRun {
  const Levels& levels;
  Scratch& scratch;
  Clock::time_point deadline;  // the op's timeout, counted from its issue

  // Each level op waits within what is left of the op's timeout, as the flat backend's do.
  std::chrono::milliseconds left() const;
  template <typename Options>
  Options timed(Options opts) const {
    opts.timeout = left();
    return opts;
  }
};

// The level ops of one op. Whatever happens (an exception included), they have all ended
// when this is destroyed: nothing may still write the op's memory when its Work ends. A
// level op never waits past the op's deadline, and a failure aborts the levels.
class Parts {
 public:
  Parts() = default;
  Parts(const Parts&) = delete;
  Parts& operator=(const Parts&) = delete;
  ~Parts();
  // Keeps w (and returns it) to be waited for.
  const WorkPtr& add(WorkPtr w);
  const WorkPtr& operator[](size_t k) const { return works_[k]; }
  // Waits for every part, even after one has failed, and throws the first failure in
  // issue order.
  void wait_all();

 private:
  std::vector<WorkPtr> works_;
};

// Pieces of a pipeline: [first, first + count) of `total` units, `per_piece` each (the last
// shorter); one empty piece when total is 0.
std::vector<std::pair<int64_t, int64_t>> pieces(int64_t total, int64_t per_piece);
// How many elements of `dtype` make one piece of a tensor whose elements go `per_element`
// times into the op's largest tensor (an all_gather's input: the group's size), in the
// multiple `multiple` (the host's ranks, for shares): a piece of the largest tensor is
// about 4 MiB, small enough that the levels' steps overlap (a host's step on one piece with
// the network's on the one before), large enough that each step's fixed cost is small
// against its bytes. At least `multiple`.
int64_t piece_elements(DType dtype, int64_t per_element, int64_t multiple);

// A tensor of n elements cut into `local` shares for a pipeline: shares of ceil(n / local)
// elements (block()), each piece of the pipeline `local` equal shares of it, local rank l's
// the l-th. When `local` does not divide n, whole() is a copy in scratch (kWhole) padded
// with zeros (reduced with the rest, then dropped), filled from the tensor if `copy_in`;
// copy_out() puts a result back.
class Shares {
 public:
  Shares(OpRun& run, const Tensor& flat, int64_t local, bool copy_in);
  int64_t block() const { return block_; }
  size_t pieces() const { return parts_.size(); }
  // Piece k's first share element (an offset into a buffer of block() elements) and size.
  int64_t first(size_t k) const { return parts_[k].first; }
  int64_t share_count(size_t k) const { return parts_[k].second; }
  Tensor piece(size_t k) const { return whole_.flat_slice(first(k) * local_, share_count(k) * local_); }
  Tensor share_of(size_t k, int64_t l) const { return piece(k).flat_slice(l * share_count(k), share_count(k)); }
  void copy_out() const;

 private:
  Tensor flat_;
  int64_t local_, block_;
  Tensor whole_;
  std::vector<std::pair<int64_t, int64_t>> parts_;
};

// Hosts of different sizes: a reduce within to local rank 0, then an all_reduce among the
// hosts' local ranks 0, which end with the group's reduction of `t` (the other ranks' `t`
// are left as they were).
void sum_at_local_rank_0(OpRun& run, Tensor& t, ReduceOp op);

// The ops. Results as the Backend's contract (api/plugin/backend.h) says; exact: the only
// arithmetic is the levels' reductions.
void all_reduce(OpRun& run, Tensor& tensor, ReduceOp op);
void broadcast(OpRun& run, Tensor& tensor, int root);
void reduce(OpRun& run, Tensor& tensor, ReduceOp op, int root);
void all_gather(OpRun& run, Tensor& output, const Tensor& input);
void reduce_scatter(OpRun& run, Tensor& output, const Tensor& input, ReduceOp op);

}  // namespace hier
}  // namespace distcomm
