// The notes backends attach to their pending Works (work_wait_note.h), for the stall
// watch's "has waited" lines; kept beside the Work (work_marks.h) until the op ends.
#include "api/diagnostics/work_wait_note.h"

#include <atomic>
#include <exception>

#include "api/diagnostics/work_destroyed_hook.h"
#include "api/diagnostics/work_marks.h"
#include "api/diagnostics/work_side_table.h"

namespace distcomm {
namespace {

// Never destroyed: Works may end, and be destroyed, during static destruction. A cleared
// note stays as "" (one entry per noted Work until it ends), so that a backend that sets and
// clears a note again and again registers one on_finish per Work, not one per note.
WorkSideTable<std::string>& notes() {
  static auto* t = new WorkSideTable<std::string>;
  return *t;
}

}  // namespace

std::string wait_note_of(const Work* work) { return notes().of(work); }

void forget_wait_note(const Work* work) { notes().forget(work); }

}  // namespace distcomm

extern "C" void distcomm_work_wait_note(distcomm::Work* work, const char* note) {
  if (work == nullptr) return;
  // From the first note on, a destroyed Work forgets its marks, this one included.
  distcomm::internal::work_destroyed_hook.store(&distcomm::forget_work_marks, std::memory_order_release);
  if (!distcomm::notes().put(work, note == nullptr ? std::string() : std::string(note))) return;
  // Not under the table's lock: a Work that has already ended runs this at once, here.
  const distcomm::Work* key = work;
  work->on_finish([key](std::exception_ptr) { distcomm::notes().forget(key); });
}
