#include "api/store/internal/name_lookup.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "api/store/internal/key_value_map.h"
#include "api/store/internal/socket.h"

namespace distcomm {
namespace internal {

namespace {

// One lookup, shared by the callers waiting for it and the thread that runs it: whichever
// lets go last frees it and what it found, so a caller that left at its deadline leaves
// nothing behind.
struct PendingLookup {
  std::string key;  // running_key(host, service, hints)
  std::string host;
  std::string service;
  addrinfo hints{};
  std::chrono::steady_clock::time_point started;
  std::mutex mu;
  std::condition_variable answered;
  bool done = false;
  int rc = 0;
  int error_number = 0;
  addrinfo* found = nullptr;

  PendingLookup() = default;
  PendingLookup(const PendingLookup&) = delete;
  PendingLookup& operator=(const PendingLookup&) = delete;
  ~PendingLookup() {
    if (found) ::freeaddrinfo(found);
  }
};

// A wait this long for a name's answer is a sign of a DNS server that does not answer: a
// resolver answers in a few milliseconds, and a silent one holds getaddrinfo for its timeout
// (5 s per try by default). A lookup cut short sooner (by a caller whose deadline had all
// but passed, as init's last probe of the store) says nothing about the server.
constexpr std::chrono::milliseconds kSilentAfter{100};

// Whether getaddrinfo's rc is a definite answer about host: no such name, or a name with no
// address. With AI_NUMERICSERV, EAI_NONAME may be about the service instead.
bool says_no_such_name(int rc, const std::string& host, const std::string& service, const addrinfo& hints) {
  if (host.empty() || is_numeric_address(host) || (hints.ai_flags & AI_NUMERICHOST)) return false;
  if ((hints.ai_flags & AI_NUMERICSERV) &&
      service.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
#ifdef EAI_NODATA
  if (rc == EAI_NODATA) return true;
#endif
  return rc == EAI_NONAME;
}

std::string lookup_error(int rc, int error_number, const std::string& host, const std::string& service,
                         const addrinfo& hints) {
  const std::string said = rc == EAI_SYSTEM ? errno_message(error_number) : ::gai_strerror(rc);
  if (!says_no_such_name(rc, host, service, hints)) return said;
  return rc == EAI_NONAME ? "'" + host + "' is not a known host name: " + said
                          : "'" + host + "' is a host name with no address: " + said;
}

void remember_answer(const std::string& key, const std::string& said);

void run(const std::shared_ptr<PendingLookup>& p) {
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(p->host.c_str(), p->service.c_str(), &p->hints, &found);
  const int error_number = errno;
  // For a later lookup of the name that its caller's deadline cuts short (look_up).
  remember_answer(p->key, rc == 0 ? std::string() : lookup_error(rc, error_number, p->host, p->service, p->hints));
  std::lock_guard<std::mutex> lock(p->mu);
  p->rc = rc;
  p->error_number = error_number;
  p->found = rc == 0 ? found : nullptr;
  if (rc != 0 && found) ::freeaddrinfo(found);
  p->done = true;
  p->answered.notify_all();
}

NameLookup on_this_thread(const std::string& host, const std::string& service, const addrinfo& hints) {
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  const int error_number = errno;
  NameLookup result;
  if (rc != 0) {
    if (found) ::freeaddrinfo(found);
    result.error = lookup_error(rc, error_number, host, service, hints);
    result.no_such_name = says_no_such_name(rc, host, service, hints);
  } else {
    result.found = std::shared_ptr<const addrinfo>(found, ::freeaddrinfo);
  }
  return result;
}

// The lookups still running, by name: a caller that retries by slices (init's probe of the
// store's server, every 0.5 s) joins the one under way instead of starting another thread,
// so a DNS server that does not answer costs one thread per name, not one per retry.
// Per process: a child forked without exec (spawn's ranks, a data loader) has none of its
// parent's lookup threads, and its copy of the parent's lock may be held by one of them, so
// it starts a table of its own (the parent's copy is left behind, a few bytes).
struct RunningLookups {
  explicit RunningLookups(pid_t p) : pid(p) {}
  const pid_t pid;
  std::mutex mu;
  std::map<std::string, std::weak_ptr<PendingLookup>> by_key;
  // What the last answered lookup of each key said ("" when it found the name).
  std::map<std::string, std::string> last_answer;
};
std::atomic<RunningLookups*> g_running{nullptr};

RunningLookups& running_lookups() {
  const pid_t me = ::getpid();
  RunningLookups* seen = g_running.load();
  while (!seen || seen->pid != me) {
    auto* mine = new RunningLookups(me);
    if (g_running.compare_exchange_strong(seen, mine)) return *mine;
    delete mine;  // another thread of this process made it first: `seen` is now that one
  }
  return *seen;
}

void remember_answer(const std::string& key, const std::string& said) {
  RunningLookups& running_now = running_lookups();
  std::lock_guard<std::mutex> lock(running_now.mu);
  running_now.last_answer[key] = said;
}

// ", what the last lookup of key met" when one in this process was answered, else "".
std::string last_answer_of(const std::string& key) {
  RunningLookups& running_now = running_lookups();
  std::lock_guard<std::mutex> lock(running_now.mu);
  auto it = running_now.last_answer.find(key);
  if (it == running_now.last_answer.end()) return "";
  return it->second.empty() ? "; the lookup of it before found it" : "; the lookup of it before said: " + it->second;
}

std::string running_key(const std::string& host, const std::string& service, const addrinfo& hints) {
  return host + '\n' + service + '\n' + std::to_string(hints.ai_family) + ' ' + std::to_string(hints.ai_socktype) +
         ' ' + std::to_string(hints.ai_protocol) + ' ' + std::to_string(hints.ai_flags);
}

// The lookup of key under way, or a new one started (an answered one is not reused: a name
// may appear in DNS after a failed lookup). Null when no thread could be made.
std::shared_ptr<PendingLookup> join_or_start(const std::string& key, const std::string& host, const std::string& service,
                                             const addrinfo& hints) {
  RunningLookups& running_now = running_lookups();
  std::lock_guard<std::mutex> lock(running_now.mu);
  auto& by_key = running_now.by_key;
  for (auto it = by_key.begin(); it != by_key.end();) {  // forget the ended ones
    it = it->second.expired() ? by_key.erase(it) : std::next(it);
  }
  if (auto running = by_key[key].lock()) {
    std::lock_guard<std::mutex> answered(running->mu);
    if (!running->done) return running;
  }
  auto pending = std::make_shared<PendingLookup>();
  pending->key = key;
  pending->host = host;
  pending->service = service;
  pending->hints = hints;
  pending->started = std::chrono::steady_clock::now();
  try {
    std::thread([pending] {
      pthread_setname_np(pthread_self(), "dc-name-lookup");
      try {
        run(pending);
      } catch (...) {
        // Only a mutex can throw here (a broken lock): the callers then wait out their
        // deadlines and report the lookup as unanswered, which names the name.
      }
    }).detach();
  } catch (const std::system_error&) {
    by_key.erase(key);
    return nullptr;
  }
  by_key[key] = pending;
  return pending;
}

}  // namespace

NameLookup look_up(const std::string& host, const std::string& service, const addrinfo& hints,
                   std::chrono::steady_clock::time_point deadline) {
  // No DNS to wait for: the wildcard, a numeric address, or a caller that says so.
  if (host.empty() || is_numeric_address(host) || (hints.ai_flags & AI_NUMERICHOST)) {
    return on_this_thread(host, service, hints);
  }
  const std::string key = running_key(host, service, hints);
  std::shared_ptr<PendingLookup> pending = join_or_start(key, host, service, hints);
  // No thread to be had (the process is at its limit): look up unbounded, as before.
  if (!pending) return on_this_thread(host, service, hints);
  std::unique_lock<std::mutex> lock(pending->mu);
  if (!pending->answered.wait_until(lock, deadline, [&] { return pending->done; })) {
    lock.unlock();
    NameLookup result;
    result.timed_out = true;
    const auto waited = std::chrono::steady_clock::now() - pending->started;
    if (waited >= kSilentAfter) {
      result.error = "looking up the name '" + host + "' had no answer after " +
                     format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(waited)) +
                     " (its DNS server, /etc/resolv.conf, does not answer; a numeric address needs no lookup)";
    } else {
      // "no answer after 0 ms" would blame a DNS server that had no time to answer.
      result.error = "looking up the name '" + host + "' was cut short by the deadline, too soon for an answer" +
                     last_answer_of(key);
    }
    return result;
  }
  NameLookup result;
  if (pending->rc != 0) {
    result.error = lookup_error(pending->rc, pending->error_number, host, service, hints);
    result.no_such_name = says_no_such_name(pending->rc, host, service, hints);
  } else {
    // Every caller that joined shares the one list, which lives as long as one holds it.
    result.found = std::shared_ptr<const addrinfo>(pending, pending->found);
  }
  return result;
}

}  // namespace internal
}  // namespace distcomm
