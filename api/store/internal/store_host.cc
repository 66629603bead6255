#include "api/store/internal/store_host.h"

#include <atomic>
#include <string>

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

std::exception_ptr store_lost(const StoreError& cause, const std::string& message, const std::string& host) {
  if (dynamic_cast<const StoreRefused*>(&cause)) return std::make_exception_ptr(StoreRefused(message));
  if (std::string(cause.what()).find(kCutOffWords) != std::string::npos) {
    return std::make_exception_ptr(StoreError(message));
  }
  return store_lost(message, host);
}

}  // namespace internal
}  // namespace distcomm
