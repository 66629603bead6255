#include "api/diagnostics/refused_transfers.h"
#include "api/diagnostics/work_marks.h"

#include <atomic>
#include <mutex>
#include <unordered_set>

namespace distcomm {
namespace {

// Process-wide: a backend's Work carries no room for the mark (its layout is the plugins'
// ABI), and refusals are rare, so a set keyed by the Work's address, each entry removed when
// its Work ends (before the Work can be freed and its address reused).
struct Marks {
  std::mutex mu;  // a leaf: nothing else is locked under it
  std::unordered_set<const Work*> works;
  std::atomic<size_t> count{0};
};

Marks& marks() {
  static Marks* m = new Marks;  // never destroyed: Works may end during static destruction
  return *m;
}

}  // namespace

bool refusal_draining(const Work* work) {
  Marks& m = marks();
  if (work == nullptr || m.count.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(m.mu);
  return m.works.count(work) != 0;
}

}  // namespace distcomm

extern "C" void distcomm_refusal_draining(distcomm::Work* work) {
  if (work == nullptr) return;
  distcomm::Marks& m = distcomm::marks();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (!m.works.insert(work).second) return;
    m.count.fetch_add(1, std::memory_order_release);
  }
  // Outside the lock: a Work that has already ended runs this at once, here.
  work->on_finish([work](std::exception_ptr) {
    distcomm::Marks& marks = distcomm::marks();
    std::lock_guard<std::mutex> lock(marks.mu);
    if (marks.works.erase(work)) marks.count.fetch_sub(1, std::memory_order_release);
  });
}
