// The buffers of one (op, size, in-place or not) case on this rank, and the distcomm call
// that runs it once. In-place cases pass views of the output buffer as input, at the
// offsets nccl-tests uses (all_gather: this rank's block of the output; reduce_scatter:
// this rank's block of the input; gather and scatter: the root's block).
#pragma once

#include <cstdint>
#include <vector>

#include "api/process_group.h"
#include "api/tensor.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/bench_op.h"
#include "tools/bench/result_check.h"

namespace distcomm {
namespace bench {

class CollectiveRunner {
 public:
  // Allocates the buffers: on cuda:<flags.cuda_device> when that is set (a backend that
  // serves CUDA tensors), else on the host. Throws InvalidArgument for a case that cannot run (root out of
  // range, send_recv on one rank), on every rank alike, before anything is sent.
  CollectiveRunner(ProcessGroup& pg, const BenchFlags& flags, int64_t requested_bytes, bool in_place);

  const BufferShape& shape() const { return shape_; }

  // Zeroes the output and writes the inputs of the data pattern with this seed.
  void fill_inputs(uint64_t seed);
  // Runs the op once and waits for it: on a CUDA device, until the GPU has finished it.
  void run();
  // Wrong elements of this rank's output, for inputs written by fill_inputs(seed).
  int64_t count_wrong(uint64_t seed) const;
  // Changes one element this rank checks (if it checks any), for --corrupt_for_test.
  // Returns whether it changed one.
  bool corrupt_result();

 private:
  DataPattern pattern(uint64_t seed) const;
  Tensor flat(int64_t count) const;
  // output_ as the host sees it: itself, or a copy of the device's.
  Tensor output_on_host() const;
  void run_and_wait();
  std::vector<ExpectedSegment> segments() const;

  ProcessGroup& pg_;
  const BenchFlags& flags_;
  const int rank_;
  const int nranks_;
  const int cuda_device_;  // -1: host buffers
  BufferShape shape_;
  Tensor output_;  // what the op writes (and, for in-place-only ops, reads)
  Tensor input_;   // what the op reads; undefined where this rank sends nothing
  Tensor output_storage_;  // whole buffers, of which output_ and input_ may be views
  Tensor input_storage_;
  std::vector<Tensor> blocks_;  // gather's outputs or scatter's inputs on the root
};

}  // namespace bench
}  // namespace distcomm
