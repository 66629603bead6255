// Which process made a group, as fork() sees it. A child forked after a group was made (a
// data loader worker, multiprocessing with fork, a program's own fork) inherits the group's
// memory: its shared segments, its sockets, its Work objects. Using them there reaches the
// parent's peers as if the child were the rank (shm: another rank reduces the child's
// data), and tearing them down there (the child's exit destroys a group held in a static)
// tells the peers the rank left. The core asks fork_generation() to tell a child from the
// process that made a group: one load, where getpid() is a system call on every op.
#pragma once

#include <cstdint>

namespace distcomm {

// Starts counting forks (a pthread_atfork child handler), once per process; call before a
// group exists (its creation does). Forks before the first call are not counted.
void count_forks();

// How many fork()s lie between the process that first called count_forks() and this one: 0
// there, 1 in its child, 2 in a grandchild.
uint64_t fork_generation();

}  // namespace distcomm
