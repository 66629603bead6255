#include "api/store/internal/store_host.h"

#include <atomic>

#include "api/errors.h"

namespace distcomm {
namespace internal {
namespace {

std::atomic<uint64_t> g_noted{0};

}  // namespace

void note_failure_for_peers() { g_noted.fetch_add(1); }

uint64_t failures_noted_for_peers() { return g_noted.load(); }

std::exception_ptr store_lost(const std::string& message, const std::string& host) {
  if (host.empty()) return std::make_exception_ptr(StoreError(message));
  return std::make_exception_ptr(PeerFailure(message + "; " + host + " (which served the store) has exited or closed it"));
}

}  // namespace internal
}  // namespace distcomm
