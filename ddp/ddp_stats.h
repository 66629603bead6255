// Statistics of one synchronised DDP iteration: how the gradients were bucketed, how many
// bytes were reduced, and how much of the communication was hidden behind backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace distcomm {
namespace ddp {

struct IterationStats {
  uint64_t iteration = 0;            // synchronised iterations so far (1 for the first)
  std::vector<size_t> bucket_bytes;  // per bucket, in launch order
  std::vector<size_t> bucket_grads;  // gradients per bucket
  size_t bytes_reduced = 0;          // sum of bucket_bytes
  // From the first gradient marked ready to the call of finish_backward().
  double backward_ms = 0;
  // Wall time during which at least one bucket's reduction was in flight.
  double comm_ms = 0;
  // The part of comm_ms that ran during backward (before finish_backward() was called).
  double overlapped_ms = 0;
  // Time finish_backward() spent waiting for the reductions: the communication not hidden.
  double wait_ms = 0;
  // Buckets whose reduction started during backward (from mark_grad_ready, before
  // finish_backward() was called); the rest started in finish_backward().
  size_t buckets_started_in_backward = 0;
  // With find_unused_parameters: the parameters no rank used since the last synchronised
  // pass (their gradients were left as they were).
  std::vector<size_t> unused_parameters;

  double overlap_fraction() const { return comm_ms > 0 ? overlapped_ms / comm_ms : 0.0; }
  // "iteration 3: 2 buckets (1.00 MiB, 3.20 MiB), 4.20 MiB reduced; backward 12.1 ms;
  //  communication 6.3 ms, 5.0 ms (79%) overlapped with backward; waited 1.3 ms"
  std::string summary() const;
};

// A time interval in milliseconds.
struct Interval {
  double begin = 0;
  double end = 0;
};

// Length of the union of the intervals, counting only the part inside [clip_begin, clip_end].
double covered_length(std::vector<Interval> intervals, double clip_begin, double clip_end);

}  // namespace ddp
}  // namespace distcomm
