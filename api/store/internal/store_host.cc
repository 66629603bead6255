#include "api/store/internal/store_host.h"

#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <string>

#include "api/errors.h"
#include "api/store/internal/socket.h"

namespace distcomm {
namespace internal {
namespace {

std::atomic<uint64_t> g_noted{0};

std::mutex g_starvation_mu;
AcceptStarvation g_starvation;  // guarded by g_starvation_mu
// Whether a spell is on, read without the lock by every accept that succeeds.
std::atomic<bool> g_starving{false};

}  // namespace

void note_failure_for_peers() { g_noted.fetch_add(1); }

uint64_t failures_noted_for_peers() { return g_noted.load(); }

void note_accept_failed(int error) {
  rlimit rl{};
  long long limit = -1;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) limit = static_cast<long long>(rl.rlim_cur);
  const auto now = AcceptStarvation::Clock::now();
  std::lock_guard<std::mutex> lock(g_starvation_mu);
  if (g_starvation.refused == 0) g_starvation.first = now;
  ++g_starvation.refused;
  g_starvation.error = error;
  g_starvation.last = now;
  g_starvation.fd_limit = limit;
  g_starving.store(true);
}

void note_accept_succeeded() {
  if (!g_starving.load()) return;
  std::lock_guard<std::mutex> lock(g_starvation_mu);
  g_starvation = AcceptStarvation{};
  g_starving.store(false);
}

AcceptStarvation accept_starvation() {
  if (!g_starving.load()) return {};
  std::lock_guard<std::mutex> lock(g_starvation_mu);
  return g_starvation;
}

bool accept_starved_now(const AcceptStarvation& s, AcceptStarvation::Clock::time_point now) {
  return s.refused > 0 && now - s.last <= kAcceptStarvedRecent;
}

std::string describe_accept_starvation(const AcceptStarvation& s) {
  char over[32];
  std::snprintf(over, sizeof over, "%.1f s",
                std::chrono::duration<double>(s.last - s.first).count());
  const std::string limit = s.fd_limit < 0 ? std::string("unlimited") : std::to_string(s.fd_limit);
  const std::string system_wide = s.error == ENFILE ? "the system's file table is full; " : "";
  return "this process's TCPStore server ran out of file descriptors (" + system_wide +
         "its soft limit, RLIMIT_NOFILE, ulimit -n, is " + limit + "): accept() failed " + std::to_string(s.refused) +
         " times over " + over + " (" + errno_message(s.error) +
         "), so it could not take those ranks' connections (their handshakes got no answer); raise `ulimit -n` "
         "on the rank that serves the store";
}

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
