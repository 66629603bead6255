#include "backends/gloo/gloo_limits.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "api/process/thread_start.h"

namespace distcomm {
namespace gloo {
namespace {

bool mentions(const std::string& message, int err) { return message.find(std::strerror(err)) != std::string::npos; }

}  // namespace

LimitKind limit_of_errno(int err) {
  if (err == EMFILE || err == ENFILE) return LimitKind::kDescriptors;
  if (err == EAGAIN || err == ENOMEM) return LimitKind::kThreads;
  return LimitKind::kNone;
}

LimitKind socket_limit_of_errno(int err) {
  if (err == ENOMEM || err == ENOBUFS) return LimitKind::kSocketMemory;
  return limit_of_errno(err) == LimitKind::kDescriptors ? LimitKind::kDescriptors : LimitKind::kNone;
}

LimitKind limit_in_message(const std::string& message) {
  // Descriptors first: a message that names both ran out of descriptors (the cause) first.
  for (int err : {EMFILE, ENFILE}) {
    if (mentions(message, err)) return LimitKind::kDescriptors;
  }
  const size_t socket_call = message.find("socket: ");
  for (int err : {ENOMEM, ENOBUFS}) {
    if (socket_call != std::string::npos && message.find(std::strerror(err), socket_call) != std::string::npos) {
      return LimitKind::kSocketMemory;
    }
  }
  for (int err : {EAGAIN, ENOMEM}) {
    if (mentions(message, err)) return LimitKind::kThreads;
  }
  return LimitKind::kNone;
}

std::string descriptor_limit_text(long long soft) {
  if (soft < 0) {
    rlimit limit{};
    soft = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
               ? static_cast<long long>(limit.rlim_cur)
               : -1;
  }
  const std::string limit = soft >= 0 ? std::to_string(soft) : std::string("unknown");
  return "this process ran out of file descriptors (its soft limit, RLIMIT_NOFILE, ulimit -n, is " + limit +
         "): raise `ulimit -n` (each gloo group holds about one socket per peer, and the job's store one "
         "connection per rank), up to the hard limit (ulimit -Hn; limits.conf's nofile beyond it), or create "
         "fewer groups";
}

std::optional<std::string> limit_failure(const std::string& what, const std::string& message) {
  switch (limit_in_message(message)) {
    case LimitKind::kDescriptors:
      return what + " (" + message + "): " + descriptor_limit_text();
    case LimitKind::kThreads: {
      // gloo's device starts its loop thread as it is made, and a pair may start none: the
      // same limits as a thread distcomm starts, said in the same words.
      const std::errc code = mentions(message, ENOMEM) ? std::errc::not_enough_memory
                                                       : std::errc::resource_unavailable_try_again;
      const std::system_error as_thread(std::make_error_code(code));
      return what + " (" + message + "): " + thread_start_failure("gloo's network", as_thread);
    }
    case LimitKind::kSocketMemory:
      return what + " (" + message +
             "): the kernel has no memory for another socket: this host, or this job's memory cgroup "
             "(memory.max), is short of memory; free some, or raise the job's memory limit";
    case LimitKind::kNone:
      break;
  }
  return std::nullopt;
}

}  // namespace gloo
}  // namespace distcomm
