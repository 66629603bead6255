// The checks every op makes of its arguments before anything is sent: each throws
// InvalidArgument naming the rank, the group, the op, the argument and what was expected
// ("rank 1/4 group 'world' all_gather: 'output' has 12 elements, expected 16 (size() *
// input.numel())").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "api/reduce_op.h"
#include "api/tensor.h"
#include "api/work.h"

namespace distcomm {

class ArgumentChecks {
 public:
  ArgumentChecks(int rank, int size, std::string where_prefix);

  // "rank 1/4 group 'world' all_reduce": the start of every message about an op.
  std::string where(OpType op) const { return where_prefix_ + op_type_name(op); }
  // "rank 1/4 group 'world' ".
  const std::string& where_prefix() const { return where_prefix_; }

  void tensor(OpType op, const Tensor& t, const char* arg) const;
  // Same dtype, device and number of elements.
  void same(OpType op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) const;
  // Same dtype and device (the counts differ by design).
  void alike(OpType op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) const;
  // The tensor forms of all_gather and reduce_scatter: `whole` holds size() times `part`.
  void whole_and_part(OpType op, const Tensor& whole, const char* whole_name, const Tensor& part,
                      const char* part_name) const;
  // A list argument: one tensor per rank, each like `like`. For a rooted op (root >= 0) the
  // list is the root's and must be empty elsewhere. Returns whether this rank holds it.
  bool list(OpType op, const std::vector<Tensor>& list, const char* arg, const Tensor& like, const char* like_name,
            int root = -1) const;
  void root(OpType op, int root) const;
  void peer(OpType op, int peer, const char* arg) const;
  // A point-to-point op's tensor, peer (peer_arg null: any source) and tag.
  void p2p(OpType op, const Tensor& t, const char* peer_arg, int peer, int tag) const;
  // A reducing op's `op` option: a kind ReduceOp names (not a value cast from elsewhere),
  // that makes sense for t's dtype (reduce_supported).
  void reduce(OpType op, ReduceOp rop, const Tensor& t) const;
  // An op's `timeout` option: positive, or kUseDefault (any negative value). Zero is refused
  // (timeouts.h): it meant "never" to some backends and "at once" to others.
  // Inline: every op passes here, most twice (its own check and the pipeline's).
  void timeout(OpType op, std::chrono::milliseconds timeout) const {
    if (timeout == std::chrono::milliseconds::zero()) refuse_zero_timeout(op);
  }
  void count(OpType op, const Tensor& t, int64_t expected, const char* arg, const std::string& why) const;
  // all_to_all_single's split sizes for `t` (arg: "input" or "output"): rows of t's dim 0,
  // one per rank, each in [0, dim 0], adding up to dim 0 without overflow; empty: dim 0
  // divided evenly. Returns the element counts the backend gets (split * elements a row).
  std::vector<int64_t> split_counts(OpType op, const Tensor& t, const std::vector<int64_t>& splits,
                                    const char* arg) const;

 private:
  [[noreturn]] void refuse_zero_timeout(OpType op) const;
  int rank_;
  int size_;
  std::string where_prefix_;
};

}  // namespace distcomm
