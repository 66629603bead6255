#include "api/ops/argument_checks.h"

#include <algorithm>

#include "api/errors.h"

namespace distcomm {

ArgumentChecks::ArgumentChecks(int rank, int size, std::string where_prefix)
    : rank_(rank), size_(size), where_prefix_(std::move(where_prefix)) {}

void ArgumentChecks::tensor(OpType op, const Tensor& t, const char* arg) const {
  if (!t.defined()) throw InvalidArgument(where(op) + ": argument '" + arg + "' is an undefined tensor");
  if (t.numel() > 0 && t.data() == nullptr) {
    throw InvalidArgument(where(op) + ": argument '" + arg + "' has no memory");
  }
}

namespace {

bool match(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.device() == b.device() && a.numel() == b.numel();
}

}  // namespace

void ArgumentChecks::same(OpType op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) const {
  if (!match(a, b)) {
    throw InvalidArgument(where(op) + ": '" + a_name + "' is " + a.describe() + " but '" + b_name + "' is " +
                          b.describe() + "; they must match in dtype, device and number of elements");
  }
}

void ArgumentChecks::alike(OpType op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) const {
  if (a.dtype() != b.dtype() || a.device() != b.device()) {
    throw InvalidArgument(where(op) + ": " + a_name + " is " + a.describe() + ", " + b_name + " is " + b.describe());
  }
}

void ArgumentChecks::whole_and_part(OpType op, const Tensor& whole, const char* whole_name, const Tensor& part,
                                    const char* part_name) const {
  tensor(op, part, part_name);
  tensor(op, whole, whole_name);
  alike(op, whole, whole_name, part, part_name);
  // The reason's text only when it is said: built every time, it was a tenth of an 8-byte
  // all_gather's instructions (callgrind).
  if (whole.numel() != part.numel() * size_) {
    count(op, whole, part.numel() * size_, whole_name, std::string("size() * ") + part_name + ".numel()");
  }
}

bool ArgumentChecks::list(OpType op, const std::vector<Tensor>& list, const char* arg, const Tensor& like,
                          const char* like_name, int root) const {
  if (root >= 0 && rank_ != root) {
    if (list.empty()) return false;
    throw InvalidArgument(where(op) + ": '" + arg + "' must be empty on non-root ranks (root is " +
                          std::to_string(root) + ")");
  }
  if (static_cast<int>(list.size()) != size_) {
    throw InvalidArgument(where(op) + ": '" + arg + "' has " + std::to_string(list.size()) +
                          " tensors, expected one per rank (" + std::to_string(size_) + ")" +
                          (root >= 0 ? " on the root" : ""));
  }
  // The element's name only when it is said (it names the index: "outputs[2]").
  for (size_t i = 0; i < list.size(); ++i) {
    if (!match(list[i], like)) same(op, list[i], (std::string(arg) + "[" + std::to_string(i) + "]").c_str(), like, like_name);
  }
  return true;
}

void ArgumentChecks::root(OpType op, int root) const {
  if (root < 0 || root >= size_) {
    throw InvalidArgument(where(op) + ": root " + std::to_string(root) + " is outside the group's ranks [0, " +
                          std::to_string(size_) + ")");
  }
}

void ArgumentChecks::peer(OpType op, int peer, const char* arg) const {
  if (peer < 0 || peer >= size_) {
    throw InvalidArgument(where(op) + ": " + arg + " " + std::to_string(peer) + " is outside [0, " +
                          std::to_string(size_) + ")");
  }
  if (peer == rank_) throw InvalidArgument(where(op) + ": " + arg + " is this rank itself (" + std::to_string(peer) + ")");
}

void ArgumentChecks::p2p(OpType op, const Tensor& t, const char* peer_arg, int peer_rank, int tag) const {
  tensor(op, t, "tensor");
  if (peer_arg) {
    peer(op, peer_rank, peer_arg);
  } else if (size_ < 2) {
    throw InvalidArgument(where(op) + ": a group of one has no other rank to receive from");
  }
  if (tag < 0) throw InvalidArgument(where(op) + ": tag must be >= 0, got " + std::to_string(tag));
}

void ArgumentChecks::reduce(OpType op, ReduceOp rop, const Tensor& t) const {
  if (!is_reduce_op_kind(rop.kind)) {
    throw InvalidArgument(where(op) + ": argument 'op' has kind " + std::to_string(static_cast<int>(rop.kind)) +
                          ", which is not a ReduceOp::Kind (" + kReduceOpKindNames + ")");
  }
  if (reduce_supported(rop, t.dtype(), nullptr)) return;  // no string to build for an op that passes
  std::string why;
  reduce_supported(rop, t.dtype(), &why);
  throw InvalidArgument(where(op) + ": " + why);
}

void ArgumentChecks::refuse_zero_timeout(OpType op) const {
  throw InvalidArgument(where(op) + ": option timeout=0 ms: give a positive timeout, or kUseDefault for the group's");
}

void ArgumentChecks::count(OpType op, const Tensor& t, int64_t expected, const char* arg,
                           const std::string& why) const {
  if (t.numel() != expected) {
    throw InvalidArgument(where(op) + ": '" + arg + "' has " + std::to_string(t.numel()) + " elements, expected " +
                          std::to_string(expected) + " (" + why + ")");
  }
}

std::vector<int64_t> ArgumentChecks::split_counts(OpType op, const Tensor& t, const std::vector<int64_t>& splits,
                                                  const char* arg) const {
  const int64_t rows = t.dim() == 0 ? 1 : t.shape()[0];
  const int64_t row = rows == 0 ? 0 : t.numel() / rows;
  std::vector<int64_t> c(static_cast<size_t>(size_));
  if (splits.empty()) {
    if (rows % size_ != 0) {
      throw InvalidArgument(where(op) + ": '" + arg + "' has " + std::to_string(rows) +
                            " rows, not divisible by the group size " + std::to_string(size_) + "; pass split sizes");
    }
    std::fill(c.begin(), c.end(), rows / size_ * row);
    return c;
  }
  if (static_cast<int>(splits.size()) != size_) {
    throw InvalidArgument(where(op) + ": " + arg + " split sizes has " + std::to_string(splits.size()) +
                          " entries, expected " + std::to_string(size_));
  }
  // Each split within [0, rows] and the running total too: then neither the sum nor a
  // split's element count (at most t.numel()) can overflow. ({2^62 + 1} x 4 once wrapped
  // to a sum of 4 and went to the backends.)
  int64_t total = 0;
  for (size_t r = 0; r < splits.size(); ++r) {
    const std::string name = std::string(arg) + "_split_sizes[" + std::to_string(r) + "]";
    if (splits[r] < 0) {
      throw InvalidArgument(where(op) + ": " + name + " is " + std::to_string(splits[r]) + ", a negative number of rows");
    }
    if (splits[r] > rows) {
      throw InvalidArgument(where(op) + ": " + name + " is " + std::to_string(splits[r]) + " rows but '" + arg +
                            "' has " + std::to_string(rows) + " (its dim 0)");
    }
    if (splits[r] > rows - total) {
      throw InvalidArgument(where(op) + ": " + arg + " split sizes add up to more than the tensor's " +
                            std::to_string(rows) + " rows at " + name);
    }
    total += splits[r];
    c[r] = splits[r] * row;
  }
  if (total != rows) {
    throw InvalidArgument(where(op) + ": " + arg + " split sizes add up to " + std::to_string(total) +
                          " rows but the tensor has " + std::to_string(rows));
  }
  return c;
}

}  // namespace distcomm
