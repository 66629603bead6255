// Manager::stop_job (manager.h): where a Manager's stop of the job, for a reason other than a
// step that keeps failing (joiner_refusal.cc writes that one), is told to the joiners that
// wait to be taken in.
#include "ft/joiner_refusal.h"
#include "ft/manager.h"

namespace distcomm {
namespace ft {

void Manager::stop_job(std::exception_ptr stop) {
  // Only a member that holds the job's state speaks for the job: a joiner that gives up
  // before it has it (its own admission timed out, its transfer failed) ends alone, and the
  // members may still go on. Every member that stops writes it; the first message stands.
  // Without the mark a waiting joiner saw nothing end, and waited out its recovery timeout.
  if (has_state_) say_job_stopped(*store_, message_of(stop));
  std::rethrow_exception(stop);
}

}  // namespace ft
}  // namespace distcomm
