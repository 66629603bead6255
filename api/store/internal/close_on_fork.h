// Descriptors that a child forked from this process lets go of at once.
//
// A process that forks without exec (a data loader worker, multiprocessing with fork,
// system()) gives the child a copy of every descriptor; a socket stays open as long as
// any copy does. So when a rank that serves the store dies while such a child lives on,
// the ranks' store connections neither answer nor close: every store call waits out its
// timeout. The store's sockets are registered here, and a pthread_atfork child handler
// points each registered descriptor of the child at /dev/null (dup2): the child drops
// its reference to the socket, and the number stays taken, so that a stale copy of a store
// object in the child cannot write into a file the child opens later. The parent's
// descriptors are untouched. (gloo's and shm's descriptors belong to gloo and to a memfd
// the child must keep mapped; those backends watch the peer's process instead:
// api/plugin/process_watch.h.)
//
// Lock-free (a fixed table of atomics): the child handler runs where only the forking
// thread exists, and may take no lock another thread held at the fork.
#pragma once

namespace distcomm {
namespace internal {

// From now on a forked child lets go of fd. Unregister it (keep_on_fork) before closing it.
// Beyond 4096 registered descriptors, the rest are not (a store process serves far fewer).
void close_on_fork(int fd);
void keep_on_fork(int fd);

}  // namespace internal
}  // namespace distcomm
