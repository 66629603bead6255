// getaddrinfo with a deadline.
//
// getaddrinfo has none of its own: a DNS server that does not answer holds it for
// resolv.conf's timeout x attempts, per server, per search domain and per address family,
// which is 20 s with glibc's defaults and minutes with a few search domains. A rank whose
// MASTER_ADDR is a name (as torchrun's users write it) would wait that long past its init
// deadline before it could say anything. So a name is looked up on a thread of its own,
// which the caller leaves at its deadline; that thread ends when getaddrinfo returns, and
// what it found is freed with the last holder. Callers that retry by slices join the lookup
// of their name under way, so a silent DNS server costs one thread per name, not one per
// retry. A numeric address needs no DNS and is looked up on the caller's thread.
#pragma once

#include <netdb.h>

#include <chrono>
#include <memory>
#include <string>

namespace distcomm {
namespace internal {

struct NameLookup {
  std::shared_ptr<const addrinfo> found;  // the list; null when the lookup failed or ran out of time
  std::string error;                      // why, when found is null
  bool timed_out = false;                 // the deadline came before the answer
  // The answer was definite: no such name (EAI_NONAME), or a name with no address
  // (EAI_NODATA). Asking again will not help (as it may after EAI_AGAIN or no answer), so a
  // caller that retries until its deadline stops; error says it plainly ("'node0' is not a
  // known host name: Name or service not known").
  bool no_such_name = false;
};

// getaddrinfo(host or null for an empty host, service, hints) by `deadline`. On a timeout,
// error says how long the lookup waited and, when that was long enough for a resolver to
// answer (100 ms or more), that it is the name's DNS server that did not answer
// (/etc/resolv.conf); a lookup cut short sooner says so, and what the last lookup of the
// name in this process met, where one did.
NameLookup look_up(const std::string& host, const std::string& service, const addrinfo& hints,
                   std::chrono::steady_clock::time_point deadline);

}  // namespace internal
}  // namespace distcomm
