// What gloo's failures to listen, connect or start a thread say when the cause is one of
// this process's limits, not the address, the network or a peer.
//
// gloo reports a socket or thread it could not make as an exception whose text ends in
// strerror ("... accept: Too many open files", std::system_error's "Resource temporarily
// unavailable"). Read plainly, those blamed the interface (DISTCOMM_SOCKET_IFNAME) or the
// peer; under `ulimit -n` or `ulimit -u` the fix is a limit, and the message says which.
#pragma once

#include <optional>
#include <string>

namespace distcomm {
namespace gloo {

// Which limit an errno or a message reports.
enum class LimitKind {
  kNone,         // not a limit: the address, the network or a peer (EADDRNOTAVAIL, ECONNREFUSED, ...)
  kThreads,      // EAGAIN, ENOMEM: threads (ulimit -u, pids.max) or memory for a thread's stack (ulimit -v)
  kDescriptors,  // EMFILE, ENFILE: file descriptors (ulimit -n)
  kSocketMemory,  // ENOMEM, ENOBUFS from socket(): the kernel's memory for sockets, not a thread
};

// What an errno from a thread's start (std::thread, pthread_create) or from another call says.
LimitKind limit_of_errno(int err);
// What an errno from socket() says: ENOMEM and ENOBUFS there are the kernel's memory for a
// socket (the host or the cgroup short of memory), not a thread (ulimit -u).
LimitKind socket_limit_of_errno(int err);

// From an exception's text: strerror's words for the errnos above, wherever gloo put them;
// ENOMEM or ENOBUFS after "socket:" (gloo's and throw_if_limit's words for a failed socket())
// is kSocketMemory.
LimitKind limit_in_message(const std::string& message);

// "this process ran out of file descriptors (...soft limit N...): raise `ulimit -n` ...".
// `soft` is RLIMIT_NOFILE's soft limit; negative: read it now (getrlimit).
std::string descriptor_limit_text(long long soft = -1);

// `what` failed for lack of a resource (what gloo said in `message`): the sentence naming the
// limit to raise, or nullopt when `message` is not about a limit. `what`: "gloo cannot listen
// on address 127.0.0.1", "the gloo rendezvous cannot connect to rank 1".
std::optional<std::string> limit_failure(const std::string& what, const std::string& message);

}  // namespace gloo
}  // namespace distcomm
