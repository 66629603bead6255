// Inputs whose collective results are exact in any order, and the checker that counts
// wrong elements in a result.
//
// Every value is a small non-negative integer drawn from a hash of (seed, rank, index),
// bounded so that any sum, product, min, max or bitwise combination over the ranks is an
// integer the dtype represents exactly. So the reduction order a backend picks (ring,
// tree, halving-doubling) cannot change the result, and a result either matches the
// reference bit for bit or is wrong. The one exception is avg on floating types, whose
// final division rounds; it is compared within a few units in the last place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/dtype.h"
#include "api/reduce_op.h"
#include "tools/bench/bench_op.h"

namespace distcomm {
namespace bench {

// Every rank's contribution is visible at any rank count: for each rank there are elements
// (a fraction of about 1/stride of them, spread by index) whose reference result changes when
// that rank's input is left out. Where the exact range of the dtype cannot hold every rank's
// value at once (a sum of 300 int8 values), each element takes a non-identity value from a
// few ranks only ("active" ones: rank r is active on element i when r = i + seed modulo the
// stride), the others give the redop's identity (0 for sums, 1 for products, ...), and the
// active rank varies with the index. The one combination this cannot cover is the average
// of an integer type over more ranks than its largest exact value (int8 from 128 ranks,
// uint8 from 256): the truncated average of values exact in the type is then always 0, and
// checkable() refuses it.
class DataPattern {
 public:
  // reduced: whether the values will be combined with redop (otherwise only copied).
  DataPattern(DType dtype, ReduceOp redop, bool reduced, int nranks, uint64_t seed);

  // Whether results can show every rank's contribution; if not, why (for a message: "the
  // average of int8 over 128 ranks is always 0 with inputs exact in int8").
  static bool checkable(DType dtype, ReduceOp redop, bool reduced, int nranks, std::string* why = nullptr);

  // The value of element `index` of `rank`'s input.
  int64_t value(int rank, int64_t index) const;
  // The reference result of combining element `index` of every rank with redop.
  double reduced_value(int64_t index) const;
  // The same without `dropped`'s contribution (its value replaced by the redop's identity;
  // the average still divides by nranks): a result that lost that rank. For tests.
  double reduced_value_without(int64_t index, int dropped) const;
  // Whether a result `got` is accepted for the reference `expected`.
  bool matches(double got, double expected) const;
  // Elements between two on which a rank is active (1: every rank on every element).
  int stride() const { return stride_; }

  // data[i] = value(rank, first_index + i), converted to the dtype.
  void fill(int rank, int64_t first_index, void* data, int64_t count) const;
  // Counts i where data[i] != reduced_value(first_index + i).
  int64_t count_wrong_reduced(const void* data, int64_t count, int64_t first_index) const;
  // Counts i where data[i] != value(src_rank, first_index + i).
  int64_t count_wrong_copied(const void* data, int64_t count, int src_rank, int64_t first_index) const;

  DType dtype() const { return dtype_; }

 private:
  uint64_t hash(int rank, int64_t index) const;
  bool active(int rank, int64_t index) const;
  int64_t identity() const;

  DType dtype_;
  ReduceOp redop_;
  bool reduced_;
  int nranks_;
  uint64_t seed_;
  int64_t max_value_;    // values lie in [0, max_value_]
  int stride_ = 1;       // rank r is active on element i when (i + seed) % stride == r % stride
  bool equal_average_;   // integer AVG: half the elements hold one value on every rank
  double tolerance_;     // relative; 0 means exact
};

// A stretch of one rank's output and what it must hold: the reduction of every rank's
// elements [first_index, first_index + count), or a copy of src_rank's.
struct ExpectedSegment {
  int64_t offset = 0;
  int64_t count = 0;
  bool reduced = false;
  int src_rank = 0;
  int64_t first_index = 0;
};

// What rank `rank` must find in its output after op, when every rank r filled its input
// with value(r, 0..) (root's input for broadcast and scatter). Empty when this rank's
// output is not defined (reduce and gather off the root).
std::vector<ExpectedSegment> expected_segments(BenchOp op, int rank, int nranks, int root,
                                               int64_t chunk);

// Counts the wrong elements of output (the dtype's elements at data) against segments.
int64_t count_wrong(const DataPattern& pattern, const std::vector<ExpectedSegment>& segments,
                    const void* data);

}  // namespace bench
}  // namespace distcomm
