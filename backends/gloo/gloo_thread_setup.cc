#include "backends/gloo/gloo_thread_setup.h"

#include <sched.h>

namespace distcomm {
namespace gloo {

void set_up_thread(pthread_t thread, const char* name, ThreadScheduling scheduling) {
  pthread_setname_np(thread, name);
  int policy = 0;
  sched_param param{};
  if (scheduling != ThreadScheduling::kBatch || pthread_getschedparam(thread, &policy, &param) != 0 ||
      policy != SCHED_OTHER) {
    return;
  }
  param.sched_priority = 0;  // SCHED_BATCH keeps the thread's nice value
  pthread_setschedparam(thread, SCHED_BATCH, &param);
}

}  // namespace gloo
}  // namespace distcomm
