// The backend conformance suite: checks written once against the ProcessGroup API, for
// every backend (gloo, mpi, nccl, and a third party's) to run in its own test.
//
// Every check is collective: all ranks of `pg` call it with the same arguments, in the same
// order. Each rank builds its inputs from (rank, index) with small integers chosen so that
// every result is exact in every dtype (sums stay within bfloat16's 8-bit mantissa, products
// of values in {1, 2, -1}), computes the expected result with a plain loop over all ranks'
// inputs, and compares with gtest EXPECTs (one per tensor, naming the first mismatches).
// Tensors that are written in place sit between guard elements, which must not change.
//
// Tensors are built on the host and moved with a Placement, so a backend for device memory
// (nccl) runs the same checks by supplying its copies; the default keeps them on the host.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/process_group.h"

namespace distcomm {
namespace conformance {

struct Placement {
  // host tensor -> a tensor of the same contents where the backend wants it.
  std::function<Tensor(const Tensor& host)> to_device;
  // tensor from to_device (possibly written by an op) -> a host tensor with its contents.
  std::function<Tensor(const Tensor& on_device)> to_host;
};
// The identity: tensors stay in host memory.
const Placement& host();

// Layouts of ops that take lists or flat tensors (ProcessGroup offers both).
enum class Layout {
  kList,     // all_gather(vector), reduce_scatter(vector)
  kTensor,   // all_gather_into_tensor, reduce_scatter_tensor
  kInPlace,  // all_gather_into_tensor whose input is this rank's block of the output
};

// A (dtype, op) pair that reduce_supported allows; PREMUL_SUM carries factor 0.5.
struct ReduceCase {
  DType dtype;
  ReduceOp op;
  std::string name() const;  // "bfloat16 max"
};
std::vector<ReduceCase> supported_reduce_cases();
std::vector<DType> all_dtypes();

// --- Collectives. root is a rank of pg. count is elements per rank (0 is allowed).
void check_all_reduce(ProcessGroup& pg, DType dtype, ReduceOp op, int64_t count, const Placement& p = host());
// MIN and MAX over floats with a NaN on one rank give NaN, whichever rank holds it (torch's
// rule; MPI's built-in MPI_MIN/MPI_MAX dropped or kept it by position: helper-69).
void check_nan_in_min_max(ProcessGroup& pg, const Placement& p = host());
void check_signed_zeros_in_min_max(ProcessGroup& pg, const Placement& p = host());
// AVG of float16 and bfloat16 values whose sum over the ranks is out of the type's range
// gives the values, not inf (all_reduce, reduce, reduce_scatter_tensor).
void check_avg_near_the_top_of_16bit_ranges(ProcessGroup& pg, const Placement& p = host());
// SUM of int8 and uint8 whose sum over the ranks leaves the type's range wraps (torch's and
// NCCL's result), at 1, 64 and 4099 elements (all_reduce, reduce, reduce_scatter_tensor).
void check_integer_sums_wrap(ProcessGroup& pg, const Placement& p = host());
void check_broadcast(ProcessGroup& pg, DType dtype, int64_t count, int root, const Placement& p = host());
// Also checks that non-root tensors are left unchanged.
void check_reduce(ProcessGroup& pg, DType dtype, ReduceOp op, int64_t count, int root, const Placement& p = host());
void check_all_gather(ProcessGroup& pg, DType dtype, int64_t count, Layout layout, const Placement& p = host());
void check_gather(ProcessGroup& pg, DType dtype, int64_t count, int root, const Placement& p = host());
void check_scatter(ProcessGroup& pg, DType dtype, int64_t count, int root, const Placement& p = host());
// all_gather, gather and scatter of lists whose tensors are views of one host buffer, in
// order (the core then runs the op over that buffer, no packed copy) and reversed (it must
// not: each block still lands in its own view).
void check_lists_of_views(ProcessGroup& pg, int64_t count);
// layout: kList or kTensor.
void check_reduce_scatter(ProcessGroup& pg, DType dtype, ReduceOp op, int64_t count, Layout layout,
                          const Placement& p = host());
// all_to_all_single on a [rows, 2] tensor. Even: rows_per_peer rows to every rank. Uneven:
// rank s sends (s + 2d + rows_per_peer) % 3 rows to rank d (some zero), with split sizes.
void check_all_to_all_single(ProcessGroup& pg, DType dtype, int64_t rows_per_peer, bool uneven,
                             const Placement& p = host());
// all_to_all_single with splits where the last rank sends and receives nothing and the
// others rows_per_peer rows to each other: the idle rank's op is still the group's (its
// peers wait for it; it returns once they meet), and it writes nothing.
void check_all_to_all_idle_rank(ProcessGroup& pg, DType dtype, int64_t rows_per_peer, const Placement& p = host());
// all_to_all_single whose output is its input: even rows, then skewed splits (rank s sends
// (s - d) mod size + rows_per_peer rows to rank d, the same total as it receives).
void check_all_to_all_in_place(ProcessGroup& pg, DType dtype, int64_t rows_per_peer, const Placement& p = host());
// all_to_all with lists, blocks of (s + 2d) % 3 + extra elements from s to d.
void check_all_to_all_list(ProcessGroup& pg, DType dtype, int64_t extra, const Placement& p = host());
// Rank 0 enters late; the others must not leave before it arrives. Needs size() >= 2.
// (p places the tensor that carries rank 0's entry time.)
void check_barrier(ProcessGroup& pg, const Placement& p = host());
// Many tensors of mixed shapes reduced as one (ProcessGroup::all_reduce_coalesced).
void check_all_reduce_coalesced(ProcessGroup& pg, DType dtype, ReduceOp op, const Placement& p = host());
// n asynchronous all_reduces issued back to back, then waited for in reverse order.
void check_many_in_flight(ProcessGroup& pg, int n, int64_t count, const Placement& p = host());

// --- Point to point (size() >= 2).
// Each rank sends to rank+1 and receives from rank-1 (a ring), with two tags posted in
// opposite orders on the two sides, so that messages must be matched by tag.
void check_send_recv(ProcessGroup& pg, DType dtype, int64_t count, const Placement& p = host());
// Rank 0 receives one message from every other rank with recv_any_source and checks that
// source_rank() names the sender of the data it got. The tag depends on count: calls with
// different counts do not match each other's messages.
void check_recv_any_source(ProcessGroup& pg, int64_t count, const Placement& p = host());

// --- Subgroups (collective over pg).
// new_group of the even and of the odd ranks: members reduce and gather within their group
// (ranks outside never call its ops), non-members get nullptr; the world group still works.
void check_new_group(ProcessGroup& pg);
// split(color = rank % 2, key = -rank), with the last rank opting out when size() >= 3:
// order by key, sizes, results, nullptr for the opted-out rank.
void check_split(ProcessGroup& pg);
// split_group: evens (descending) and odds (ascending) in two lists, the last rank of 3+
// left out; lists that overlap are refused on every rank, and the world still works.
void check_split_group(ProcessGroup& pg);
// DeviceMesh over pg with `shape` (2-D, product == pg.size()): coordinates, each dimension's
// group (members, order, exact all_reduce, both dimensions' ops in flight at once), slices,
// and flatten of the whole mesh and of a reordered slice.
void check_device_mesh(ProcessGroup& pg, const std::vector<int>& shape);

// --- Object collectives (api/object_collectives.h), over pg's own ops.
// all_gather_object, broadcast_object (every root), gather_object and scatter_object of byte
// strings of different lengths (one empty, zero bytes inside, one of 1 MiB + 3), all empty
// too; scatter_object with a list of the wrong length on src fails on every rank, naming it,
// and the group goes on.
void check_object_collectives(ProcessGroup& pg);

// --- Bad arguments: InvalidArgument is thrown by the call itself, before anything is sent.
// Only rank 0 makes the bad calls; a collective right after must still match on all ranks.
void check_invalid_arguments(ProcessGroup& pg);

// --- Sweeps, for backend suites: every case above at one count.
// all_reduce, reduce (root size()-1) and reduce_scatter (both layouts alternate) for every
// supported (dtype, op) pair.
void sweep_reductions(ProcessGroup& pg, int64_t count, const Placement& p = host());
// broadcast, all_gather (three layouts), gather, scatter (roots other than 0), all_to_all
// (single and list, even and uneven) for every dtype.
void sweep_data_movement(ProcessGroup& pg, int64_t count, const Placement& p = host());
// The subset kept for large counts (the full sweep at 1M elements would take minutes on a
// small machine): all_reduce float32 sum/max, bfloat16 sum, int64 sum; reduce float16 sum;
// reduce_scatter float32 sum; broadcast float32; all_gather float32 into a tensor.
void sweep_large(ProcessGroup& pg, int64_t count, const Placement& p = host());
// send/recv of float32, bfloat16, int64 and bool at 0, 1 and 1000 elements, float32 at
// large_count, recv_any_source at 0 and 100, barrier (size() >= 2).
void sweep_point_to_point(ProcessGroup& pg, int64_t large_count, const Placement& p = host());

}  // namespace conformance
}  // namespace distcomm
