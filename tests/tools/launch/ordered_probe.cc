// A distcomm program for the launcher tests: each rank says hello through ordered_print,
// the higher ranks first in time, so that only ordering can put the lines in rank order.
// Runs on any backend that can create a group (the tests use the store-only any_size one).
#include <unistd.h>

#include <string>

#include "api/init.h"
#include "api/logging.h"

int main() {
  distcomm::ProcessGroupPtr pg = distcomm::init_process_group();
  ::usleep(50000 * (pg->size() - 1 - pg->rank()));
  distcomm::ordered_print(*pg, "hello from rank " + std::to_string(pg->rank()) + "\nsecond line of rank " +
                                   std::to_string(pg->rank()));
  return 0;
}
