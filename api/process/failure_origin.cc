#include "api/process/failure_origin.h"

#include <atomic>

namespace distcomm {
namespace {

std::atomic<bool> g_latest_failure_adopted{false};

}  // namespace

void note_group_failure_origin(bool adopted) { g_latest_failure_adopted.store(adopted); }

bool latest_group_failure_was_adopted() { return g_latest_failure_adopted.load(); }

}  // namespace distcomm
