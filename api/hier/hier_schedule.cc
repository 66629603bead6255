#include "api/hier/hier_schedule.h"

#include <algorithm>

namespace distcomm {
namespace hier {

int Levels::largest_host() const {
  size_t most = 0;
  for (const auto& h : hosts.hosts) most = std::max(most, h.size());
  return static_cast<int>(most);
}

Tensor Scratch::get(Use use, int64_t count, DType dtype) {
  Tensor& kept = kept_[use];
  const size_t bytes = static_cast<size_t>(count) * element_size(dtype);
  if (!kept.defined() || kept.nbytes() < bytes) kept = Tensor::empty({static_cast<int64_t>(bytes)}, DType::kUInt8);
  return Tensor::from_blob(kept.data(), {count}, dtype);
}

std::chrono::milliseconds OpRun::left() const {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(ms, std::chrono::milliseconds(1));
}

const WorkPtr& Parts::add(WorkPtr w) {
  works_.push_back(std::move(w));
  return works_.back();
}

void Parts::wait_all() {
  std::exception_ptr first;
  for (const WorkPtr& w : works_) {
    try {
      w->wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  works_.clear();
  if (first) std::rethrow_exception(first);
}

Parts::~Parts() {
  try {
    wait_all();
  } catch (...) {
    // An exception already on its way out says what failed; a part's own failure, after a
    // wait_all that threw, is that failure's consequence.
  }
}

std::vector<std::pair<int64_t, int64_t>> pieces(int64_t total, int64_t per_piece) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t first = 0; first < total || out.empty(); first += per_piece) {
    out.emplace_back(first, std::min(per_piece, total - first));
  }
  return out;
}

int64_t piece_elements(DType dtype, int64_t per_element, int64_t multiple) {
  constexpr int64_t kPieceBytes = 4 << 20;
  const int64_t elements = kPieceBytes / static_cast<int64_t>(element_size(dtype)) / per_element;
  return std::max<int64_t>(1, elements / multiple) * multiple;
}

void sum_at_local_rank_0(OpRun& run, Tensor& t, ReduceOp op) {
  const Levels& lv = run.levels;
  ReduceOptions to_leader;
  to_leader.op = op;
  lv.within->reduce(t, run.timed(to_leader))->wait();
  if (lv.local == 0 && lv.across_others()) {
    AllReduceOptions all;
    all.op = op;
    lv.across->all_reduce(t, run.timed(all))->wait();
  }
}

Shares::Shares(OpRun& run, const Tensor& flat, int64_t local, bool copy_in)
    : flat_(flat), local_(local), block_((flat.numel() + local - 1) / local), whole_(flat) {
  const int64_t n = flat.numel();
  if (block_ * local != n) {
    whole_ = run.scratch.get(Scratch::kWhole, block_ * local, flat.dtype());
    if (copy_in) whole_.flat_slice(0, n).copy_from(flat);
    whole_.flat_slice(n, block_ * local - n).fill(0);
  }
  parts_ = hier::pieces(block_, piece_elements(flat.dtype(), 1, local) / local);
}

void Shares::copy_out() const {
  if (whole_.data() == flat_.data()) return;
  Tensor out = flat_;
  out.copy_from(whole_.flat_slice(0, flat_.numel()));
}

}  // namespace hier
}  // namespace distcomm
