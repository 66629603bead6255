#include "api/store/internal/name_lookup.h"

#include <pthread.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#include "api/store/internal/key_value_map.h"
#include "api/store/internal/socket.h"

namespace distcomm {
namespace internal {

namespace {

// One lookup, shared by the caller and the thread that runs it: whichever lets go last
// frees it, so a caller that left at its deadline leaves nothing behind.
struct PendingLookup {
  std::string host;
  std::string service;
  addrinfo hints{};
  std::mutex mu;
  std::condition_variable answered;
  bool done = false;
  bool abandoned = false;  // the caller left at its deadline: the thread frees `found`
  int rc = 0;
  int error_number = 0;
  addrinfo* found = nullptr;
};

void run(const std::shared_ptr<PendingLookup>& p) {
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(p->host.empty() ? nullptr : p->host.c_str(), p->service.c_str(), &p->hints, &found);
  const int error_number = errno;
  std::lock_guard<std::mutex> lock(p->mu);
  if (p->abandoned) {
    if (found) ::freeaddrinfo(found);
  } else {
    p->rc = rc;
    p->error_number = error_number;
    p->found = found;
  }
  p->done = true;
  p->answered.notify_all();
}

std::string lookup_error(int rc, int error_number) {
  return rc == EAI_SYSTEM ? errno_message(error_number) : ::gai_strerror(rc);
}

NameLookup answered(int rc, int error_number, addrinfo* found) {
  NameLookup result;
  if (rc != 0) {
    if (found) ::freeaddrinfo(found);
    result.error = lookup_error(rc, error_number);
  } else {
    result.found.reset(found);
  }
  return result;
}

NameLookup on_this_thread(const std::string& host, const std::string& service, const addrinfo& hints) {
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  return answered(rc, errno, found);
}

}  // namespace

NameLookup look_up(const std::string& host, const std::string& service, const addrinfo& hints,
                   std::chrono::steady_clock::time_point deadline) {
  // No DNS to wait for: the wildcard, a numeric address, or a caller that says so.
  if (host.empty() || is_numeric_address(host) || (hints.ai_flags & AI_NUMERICHOST)) {
    return on_this_thread(host, service, hints);
  }
  auto pending = std::make_shared<PendingLookup>();
  pending->host = host;
  pending->service = service;
  pending->hints = hints;
  const auto started = std::chrono::steady_clock::now();
  try {
    std::thread([pending] {
      pthread_setname_np(pthread_self(), "dc-name-lookup");
      try {
        run(pending);
      } catch (...) {
        // Only the mutex can throw here (a broken lock): the caller then waits out its
        // deadline and reports the lookup as unanswered, which names the name.
      }
    }).detach();
  } catch (const std::system_error&) {
    // No thread to be had (the process is at its limit): look up unbounded, as before.
    return on_this_thread(host, service, hints);
  }
  std::unique_lock<std::mutex> lock(pending->mu);
  if (!pending->answered.wait_until(lock, deadline, [&] { return pending->done; })) {
    pending->abandoned = true;
    NameLookup result;
    result.timed_out = true;
    result.error = "looking up the name '" + host + "' had no answer after " +
                   format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - started)) +
                   " (its DNS server, /etc/resolv.conf, does not answer; a numeric address needs no lookup)";
    return result;
  }
  addrinfo* found = pending->found;
  pending->found = nullptr;
  return answered(pending->rc, pending->error_number, found);
}

}  // namespace internal
}  // namespace distcomm
