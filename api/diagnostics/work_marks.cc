// The core's marks on backends' Works (work_marks.h): ordinal epochs of point-to-point ops
// and recvs draining the message they refused (refused_transfers.h's entry point).
#include "api/diagnostics/work_marks.h"

#include <atomic>

#include "api/diagnostics/refused_transfers.h"
#include "api/diagnostics/work_destroyed_hook.h"
#include "api/diagnostics/work_side_table.h"

namespace distcomm {
namespace {

// Never destroyed: Works may end, and be destroyed, during static destruction.
WorkSideTable<uint64_t>& epochs() {
  static auto* t = new WorkSideTable<uint64_t>;
  return *t;
}

WorkSideTable<bool>& draining() {
  static auto* t = new WorkSideTable<bool>;
  return *t;
}

// Notes `value` in `table` for `work` until the op ends.
template <typename Value>
void note_until_finished(WorkSideTable<Value>& table, Work& work, Value value) {
  // From the first mark on, a destroyed Work forgets its marks (no cost before any).
  internal::work_destroyed_hook.store(&forget_work_marks, std::memory_order_release);
  if (!table.note(&work, value)) return;
  // Not under the table's lock: a Work that has already ended runs this at once, here.
  const Work* key = &work;
  work.on_finish([&table, key](std::exception_ptr) { table.forget(key); });
}

}  // namespace

void note_ordinal_epoch(Work& work, uint64_t epoch) {
  if (epoch != 0) note_until_finished(epochs(), work, epoch);
}

uint64_t ordinal_epoch_of(const Work* work) { return epochs().of(work); }

bool refusal_draining(const Work* work) { return draining().of(work); }

void forget_work_marks(const Work* work) {
  epochs().forget(work);
  draining().forget(work);
  forget_wait_note(work);  // work_wait_note.cc
}

}  // namespace distcomm

extern "C" void distcomm_refusal_draining(distcomm::Work* work) {
  if (work != nullptr) distcomm::note_until_finished(distcomm::draining(), *work, true);
}
