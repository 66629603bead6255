#include "backends/gloo/gloo_work.h"

#include "backends/gloo/gloo_worker.h"

namespace distcomm {
namespace gloo {

void GlooWork::wait(std::chrono::milliseconds timeout) {
  if (forked_since_issue(*this)) return Work::wait(timeout);  // before driving or blocking (work.h)
  if (auto worker = worker_.lock()) {
    if (Work::is_completed()) {
      worker->note_waited(ticket_);  // the caller waits for its ops: it will for the next
    } else if (is_use_default(timeout)) {
      worker->drive(ticket_, description());
    } else {
      worker->refuse_wait_in_a_callback(description());
      worker->hurry(ticket_);  // with a deadline this thread must be free to give up
    }
  }
  Work::wait(timeout);  // rethrows the op's error
}

bool GlooWork::is_completed() const {
  if (Work::is_completed()) return true;
  if (forked_since_issue(*this)) return false;  // the worker is the parent's (work.h)
  if (auto worker = worker_.lock()) worker->hurry(ticket_);  // polled: nobody will wait() for it soon
  return false;
}

}  // namespace gloo
}  // namespace distcomm
