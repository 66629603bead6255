// One shared memory segment: an anonymous memfd, never a name in /dev/shm.
//
// The owner creates it and holds an open-file-description lock on its first byte for as
// long as it has the file open. Peers open the same file through /proc/<pid>/fd/<fd>
// (the owner's pid and descriptor travel through the group's store) and map it. So:
//   - nothing is ever left behind: the memory goes when the last process unmaps it,
//     however the processes end (SIGKILL included);
//   - a peer learns that the owner died without asking the owner: the kernel drops the lock
//     when the owner's descriptor closes, which happens at exit, even before the dead
//     process is reaped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace distcomm {
namespace shm {

// What to add to "cannot open the peer's segment /proc/<pid>/fd/<fd>: <strerror(err)>":
// why that errno happens and what to do (open_peer's refusals; group_size when known, for
// EMFILE).
std::string open_failure_hint(int err, int group_size);
// For a call that makes a descriptor (memfd_create, open) and failed with err: EMFILE says
// this process ran out of descriptors, its limit (RLIMIT_NOFILE, ulimit -n) and what the
// group holds (group_size when known, > 1); ENFILE, the system's table; "" otherwise.
std::string descriptor_failure_hint(int err, int group_size);

// "" when a file of `bytes` fits this process's RLIMIT_FSIZE (ulimit -f), else the refusal
// to throw (as BackendUnavailable): the bytes needed, the limit and what to do. A memfd
// grown past that limit raises SIGXFSZ, which ends the process unless handled.
std::string file_size_limit_failure(size_t bytes);

class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // A zero-filled segment of `bytes`, mapped and locked by this process, its first
  // `populate` bytes allocated and mapped now (the rest as ops first touch it). `name`
  // shows in /proc/<pid>/maps ("memfd:<name>"). Throws BackendUnavailable with the
  // system's reason.
  // group_size (when known): for the count of descriptors an EMFILE's hint gives.
  static Segment create(const std::string& name, size_t bytes, size_t populate, int group_size = 0);
  // Maps the segment another process of this host created (its /proc pid and descriptor),
  // its first `populate` bytes now. Throws BackendUnavailable saying what could not be
  // opened and why.
  // group_size (when > 1) lets a refusal for want of descriptors say how many the group
  // holds.
  static Segment open_peer(int proc_pid, int fd, size_t bytes, size_t populate, int group_size = 0);

  uint8_t* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  int fd() const { return fd_; }
  // For a peer's segment: whether its owner still holds its lock (is alive).
  bool owner_alive() const;

 private:
  void release();

  int fd_ = -1;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
};

// This process's pid as /proc shows it (which can differ from getpid() inside a PID
// namespace whose /proc is the parent's). -1 when /proc is not readable.
int proc_self_pid();

}  // namespace shm
}  // namespace distcomm
