// The ordinal epochs of point-to-point ops, by Work (work_marks.h). The draining marks are
// refused_transfers.cc's.
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "api/diagnostics/work_marks.h"

namespace distcomm {
namespace {

// Process-wide, as the draining marks: an epoch is non-zero only once a pair of ranks has
// used more than 256 tags (op_numbering.h), so most programs never write here, and the
// watch's reads cost one atomic load each.
struct Epochs {
  std::mutex mu;  // a leaf: nothing else is locked under it
  std::unordered_map<const Work*, uint64_t> by_work;
  std::atomic<size_t> count{0};
};

Epochs& epochs() {
  static Epochs* e = new Epochs;  // never destroyed: Works may end during static destruction
  return *e;
}

}  // namespace

void note_ordinal_epoch(Work& work, uint64_t epoch) {
  if (epoch == 0) return;
  Epochs& e = epochs();
  {
    std::lock_guard<std::mutex> lock(e.mu);
    if (!e.by_work.emplace(&work, epoch).second) return;
    e.count.fetch_add(1, std::memory_order_release);
  }
  // Outside the lock: a Work that has already ended runs this at once, here.
  const Work* key = &work;
  work.on_finish([key](std::exception_ptr) {
    Epochs& all = epochs();
    std::lock_guard<std::mutex> lock(all.mu);
    if (all.by_work.erase(key)) all.count.fetch_sub(1, std::memory_order_release);
  });
}

uint64_t ordinal_epoch_of(const Work* work) {
  Epochs& e = epochs();
  if (work == nullptr || e.count.load(std::memory_order_acquire) == 0) return 0;
  std::lock_guard<std::mutex> lock(e.mu);
  const auto it = e.by_work.find(work);
  return it == e.by_work.end() ? 0 : it->second;
}

}  // namespace distcomm
