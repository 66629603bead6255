// A fault-suite Runner whose ranks are threads of this process, each with its
// ProcessGroup over the in_process test plugin (tests/testing/in_process_group.h), meeting
// in a HashStore; the board is another. Its ranks cannot die alone, and no rank hosts the
// store.
#pragma once

#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {

RunnerPtr in_process_runner();

}  // namespace fault
}  // namespace distcomm
