// distcomm_resolve (plugin/name_resolution.h): the core's bounded lookup, as a C entry
// point a plugin can call through a weak reference.
#include "api/plugin/name_resolution.h"

#include <algorithm>
#include <cstring>

#include "api/store/internal/name_lookup.h"

namespace {

void say(const char* why, char* error, size_t error_size) noexcept {
  if (!error || error_size == 0) return;
  const size_t n = std::min(std::strlen(why), error_size - 1);
  std::memcpy(error, why, n);
  error[n] = '\0';
}

}  // namespace

// noexcept, and every exception caught: nothing may cross into a plugin's C call.
extern "C" int distcomm_resolve(const char* host, const char* service, int family, int socktype, int64_t wait_ms,
                                distcomm_address* out, int max, char* error, size_t error_size,
                                int* timed_out) noexcept {
  if (timed_out) *timed_out = 0;
  try {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = socktype;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, wait_ms));
    const distcomm::internal::NameLookup found =
        distcomm::internal::look_up(host ? host : "", service ? service : "", hints, deadline);
    if (!found.found) {
      say(found.error.c_str(), error, error_size);
      if (timed_out) *timed_out = found.timed_out ? 1 : 0;
      return -1;
    }
    int n = 0;  // addresses found that fit a sockaddr_storage; the first `max` written
    for (const addrinfo* a = found.found.get(); a != nullptr; a = a->ai_next) {
      if (a->ai_addrlen > sizeof(sockaddr_storage)) continue;
      if (n < max && out) {
        std::memset(&out[n], 0, sizeof(out[n]));
        std::memcpy(&out[n].address, a->ai_addr, a->ai_addrlen);
        out[n].length = a->ai_addrlen;
      }
      ++n;
    }
    return n;
  } catch (const std::exception& e) {
    say(e.what(), error, error_size);
    return -1;
  } catch (...) {
    say("unknown error", error, error_size);
    return -1;
  }
}
