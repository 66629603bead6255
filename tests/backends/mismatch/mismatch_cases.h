// Ranks that disagree on an op: the cases of a 3-rank group that gloo's and mpi's tests run
// under DISTCOMM_DEBUG=DETAIL, and a few of their own (the default-settings cases of every
// backend are the fault suite's, tests/backends/fault). Each rank calls the same function;
// what it does depends on its rank. The functions that return an op make it fail
// (expect_failure_within checks the type and when); the others check everything themselves.
#pragma once

#include <functional>
#include <string>

#include "api/process_group.h"
#include "tests/testing/failure_checks.h"

namespace distcomm {
namespace mismatch {

using testing::expect_failure_within;
using testing::mark_done;
using testing::seconds_since;
using testing::wait_for_done;

// A barrier (#0), then the mismatched op (#1), waited for.
// Rank 0 reduces 10 floats, the others 20.
std::function<void()> all_reduce_counts(ProcessGroup& pg);
// Rank 0 float32[10], the others `other`[10].
std::function<void()> all_reduce_dtypes(ProcessGroup& pg, DType other);
// Rank 0 sums, the others take the max.
std::function<void()> all_reduce_ops(ProcessGroup& pg);
// Rank 0 all_reduces, the others broadcast from rank 0.
std::function<void()> all_reduce_or_broadcast(ProcessGroup& pg);
// Rank 0 broadcasts from root 0, the others from root 1; each rank's tensor holds rank + 1,
// and is left in *result (when given) if the broadcast succeeds.
std::function<void()> broadcast_roots(ProcessGroup& pg, Tensor* result = nullptr);
// all_to_all_single of 6 floats: rank 2 splits its input [1, 3, 2], everyone expects 2
// from each rank.
std::function<void()> all_to_all_splits(ProcessGroup& pg);

// Rank 0 sends `sent` floats to rank 1, which receives into `received`; rank 2 looks on.
// The recv must fail with InvalidArgument naming both counts within `within` seconds,
// leaving its tensor untouched. The send too when sender_told; else (a backend whose send
// completes once the receiver has taken the message, as MPI's does) it must succeed within
// `within`, never wait out the group's timeout.
void p2p_sizes(ProcessGroup& pg, int64_t sent, int64_t received, double within, bool sender_told = true);
// Ranks 0 and 1 issue an all_reduce that rank 2 never joins (group timeout), then one with
// a 1.5 s timeout: that one fails 1.5 s after it was issued, with Timeout.
void queued_op_times_out(ProcessGroup& pg);

// Under DISTCOMM_DEBUG=DETAIL: every collective case above, one after another in one group
// (the check throws before any rank issues the op, so the group stays usable), each a
// Desync on every rank within `within` seconds whose message says DETAIL found it; then an
// all_reduce that must succeed.
void detail_finds_every_collective_case(ProcessGroup& pg, double within);
// Rank 0 sends float32[4] to rank 1, which receives into int32[4] (the same bytes): the recv
// must fail with InvalidArgument within `within` seconds, its message containing `names`;
// the send too when sender_told, else it must succeed.
void p2p_dtypes(ProcessGroup& pg, double within, const char* names, bool sender_told);

// Under DISTCOMM_DEBUG=DETAIL, recv_any_source: ranks 0 and 2 each send rank 1 three
// floats holding rank + 1, which rank 1 takes with two recvs from any rank (each must hold
// its source's values and name it). Then rank 0 sends float32[4] to rank 1, which takes it
// from any rank into int32[4] (the same bytes): that recv must fail with InvalidArgument
// within `within` seconds naming both dtypes, rank 0 and `names`; the send too when
// sender_told, else it must succeed.
void detail_any_source(ProcessGroup& pg, double within, const char* names, bool sender_told);
// The same for batch_isend_irecv: a ring of batches (each rank sends its right neighbour
// two floats and receives its left neighbour's) must deliver; then rank 0's batch sends
// float32[4] to rank 1, whose batch receives it into int32[4]: rank 1's batch fails with
// InvalidArgument naming both dtypes, rank 0 and `names` (rank 0's too when sender_told).
void detail_batch(ProcessGroup& pg, double within, const char* names, bool sender_told);

}  // namespace mismatch
}  // namespace distcomm
