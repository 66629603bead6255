// distcomm_resolve (plugin/name_resolution.h): the core's bounded lookup, as a C entry
// point a plugin can call through a weak reference.
#include "api/plugin/name_resolution.h"

#include <algorithm>
#include <cstring>

#include "api/store/internal/name_lookup.h"

extern "C" int distcomm_resolve(const char* host, const char* service, int family, int socktype, int64_t wait_ms,
                                distcomm_address* out, int max, char* error, size_t error_size, int* timed_out) {
  auto say = [&](const std::string& why) {
    if (error && error_size > 0) {
      const size_t n = std::min(why.size(), error_size - 1);
      std::memcpy(error, why.data(), n);
      error[n] = '\0';
    }
  };
  if (timed_out) *timed_out = 0;
  try {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = socktype;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, wait_ms));
    const distcomm::internal::NameLookup found =
        distcomm::internal::look_up(host ? host : "", service ? service : "", hints, deadline);
    if (!found.found) {
      say(found.error);
      if (timed_out) *timed_out = found.timed_out ? 1 : 0;
      return -1;
    }
    int n = 0;
    for (const addrinfo* a = found.found.get(); a != nullptr; a = a->ai_next, ++n) {
      if (n < max && out && a->ai_addrlen <= sizeof(sockaddr_storage)) {
        std::memset(&out[n], 0, sizeof(out[n]));
        std::memcpy(&out[n].address, a->ai_addr, a->ai_addrlen);
        out[n].length = a->ai_addrlen;
      }
    }
    return n;
  } catch (const std::exception& e) {  // nothing may cross the C boundary
    say(e.what());
    return -1;
  }
}
