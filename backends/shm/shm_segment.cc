#include "backends/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "api/errors.h"

namespace distcomm {
namespace shm {
namespace {

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

// The owner's lock covers byte 0 of its file; peers test for it with the same range.
struct flock lock_range(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 1;
  return fl;
}

// How the populated pages are touched once mapped: written (this rank's own segment, still
// all zeros and seen by nobody) or read (a peer's, which its owner may be writing).
enum class Touch { kWrite, kRead };

// Maps `bytes` of fd, the first `populate` of them with MAP_POPULATE and then touched once
// from here: those pages are allocated and mapped at group creation, not by the first ops
// that touch them. MAP_POPULATE alone is not enough: it maps a shared page read-only until
// its first write (one more fault), and under a hypervisor that shadows page tables every
// page's first access from user space is a trap of its own (~20 us a page on this project's
// VMs: 5 ms per MiB, which made a group's first four 1 MiB all_reduces 7-10 ms each, one
// per staging slot, against ~0.1 ms after). The rest is mapped but not touched: its memory
// is allocated, and its page tables filled, only where an op uses it (a pair's p2p ring on
// its first transfer).
uint8_t* map_shared(int fd, size_t bytes, size_t populate, Touch touch, const std::string& what) {
  auto failed = [&](size_t n) {
    return BackendUnavailable(system_error("shm: mmap of " + what + " (" + std::to_string(n) + " bytes)"));
  };
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (populate >= bytes ? MAP_POPULATE : 0), fd, 0);
  if (p == MAP_FAILED) throw failed(bytes);
  if (populate > 0 && populate < bytes &&
      ::mmap(p, populate, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0) == MAP_FAILED) {
    const BackendUnavailable error = failed(populate);
    ::munmap(p, bytes);
    throw error;
  }
  volatile uint8_t* const pages = static_cast<uint8_t*>(p);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t touched = std::min(populate, bytes);
  uint8_t sum = 0;
  for (size_t at = 0; at < touched; at += page) {
    if (touch == Touch::kWrite) {
      pages[at] = 0;
    } else {
      sum = static_cast<uint8_t>(sum + pages[at]);
    }
  }
  (void)sum;
  return static_cast<uint8_t*>(p);
}

}  // namespace

Segment::~Segment() { release(); }

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Segment::release() {
  if (base_) ::munmap(base_, bytes_);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  fd_ = -1;
}

Segment Segment::create(const std::string& name, size_t bytes, size_t populate, int group_size) {
  Segment s;
  s.fd_ = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (s.fd_ < 0) {
    const int err = errno;
    throw BackendUnavailable(system_error("shm: memfd_create of this rank's segment") +
                             descriptor_failure_hint(err, group_size));
  }
  // A memfd starts with mode 0777. Peers open it through /proc/<pid>/fd/<fd>, which needs
  // ptrace-read access to this process, and then the file's own mode: 0600 keeps it to
  // this process's user (and root), whatever else could reach the link.
  if (::fchmod(s.fd_, S_IRUSR | S_IWUSR) != 0) throw BackendUnavailable(system_error("shm: making the segment 0600"));
  // Past RLIMIT_FSIZE (ulimit -f) the kernel sends SIGXFSZ before ftruncate fails, and that
  // signal's default action ends the process with no word: refused here first, with the limit.
  if (const std::string over = file_size_limit_failure(bytes); !over.empty()) throw BackendUnavailable(over);
  if (::ftruncate(s.fd_, static_cast<off_t>(bytes)) != 0) {
    throw BackendUnavailable(system_error("shm: sizing the segment to " + std::to_string(bytes) + " bytes"));
  }
  struct flock fl = lock_range(F_WRLCK);
  if (::fcntl(s.fd_, F_OFD_SETLK, &fl) != 0) throw BackendUnavailable(system_error("shm: locking the segment"));
  s.base_ = map_shared(s.fd_, bytes, populate, Touch::kWrite, "this rank's segment");
  s.bytes_ = bytes;
  return s;
}

std::string file_size_limit_failure(size_t bytes) {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || bytes <= rl.rlim_cur) return "";
  std::string text = "shm: this rank's segment needs " + std::to_string(bytes) +
                     " bytes, over this process's file size limit of " + std::to_string(rl.rlim_cur) +
                     " bytes (RLIMIT_FSIZE, ulimit -f, which counts 1024-byte blocks; the segment is a memfd, and "
                     "growing it past the limit would end the process with SIGXFSZ): raise it, e.g. ulimit -f "
                     "unlimited before starting the job";
  if (rl.rlim_max != RLIM_INFINITY) text += " (its hard limit, ulimit -Hf, is " + std::to_string(rl.rlim_max) + " bytes)";
  return text + ", or use DISTCOMM_BACKEND=gloo (or --backend=gloo)";
}

std::string open_failure_hint(int err, int group_size) {
  switch (err) {
    case ENOENT:
      // The peer's process, or its segment, is gone (it exited, or its own part of the
      // creation failed): the hint about users and namespaces would mislead there.
      return " (the peer's process has ended, or closed its segment: it left the group's creation)";
    case EMFILE:
    case ENFILE:
      return descriptor_failure_hint(err, group_size);
    case ENOMEM:
      return " (the kernel is out of memory)";
    default:
      // EACCES, EPERM: /proc/<pid>/fd needs ptrace-read access to the peer. Ranks of other
      // users can never share shm segments: gloo's sockets need no such access.
      return " (both processes must run as the same user in one PID namespace, and the peer must not be marked "
             "non-dumpable; use DISTCOMM_BACKEND=gloo (or --backend=gloo) for ranks that run as different users)";
  }
}

std::string descriptor_failure_hint(int err, int group_size) {
  if (err == ENFILE) return " (the system's table of open files is full: see fs.file-max and what holds so many files)";
  if (err != EMFILE) return "";
  // The launcher's words for the same limit (launch_options.cc): RLIMIT_NOFILE, ulimit -n.
  struct rlimit rl {};
  const bool known = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
  std::string hint = " (this process has no file descriptor left under its limit";
  if (known) hint += " of " + std::to_string(rl.rlim_cur);
  hint += " (RLIMIT_NOFILE, ulimit -n): raise it, e.g. ulimit -n 65536 before starting the job";
  if (known && rl.rlim_max != RLIM_INFINITY) hint += " (its hard limit, ulimit -Hn, is " + std::to_string(rl.rlim_max) + ")";
  if (group_size > 1) {
    hint += "; each rank of this shm group of " + std::to_string(group_size) + " ranks holds " +
            std::to_string(2 * group_size - 1) +
            " descriptors for it (its own segment, and each peer's segment and process watch), on top of "
            "those the program and its other groups hold";
  }
  return hint + ")";
}

Segment Segment::open_peer(int proc_pid, int fd, size_t bytes, size_t populate, int group_size) {
  const std::string path = "/proc/" + std::to_string(proc_pid) + "/fd/" + std::to_string(fd);
  Segment s;
  s.fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (s.fd_ < 0) {
    const int err = errno;
    throw BackendUnavailable(system_error("shm: cannot open the peer's segment " + path) + open_failure_hint(err, group_size));
  }
  struct stat st {};
  if (::fstat(s.fd_, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    throw BackendUnavailable("shm: " + path + " is " + std::to_string(st.st_size) + " bytes, expected " +
                             std::to_string(bytes) + ": not the peer's segment (did the peer exit?)");
  }
  s.base_ = map_shared(s.fd_, bytes, populate, Touch::kRead, path);
  s.bytes_ = bytes;
  return s;
}

bool Segment::owner_alive() const {
  struct flock fl = lock_range(F_WRLCK);
  if (::fcntl(fd_, F_OFD_GETLK, &fl) != 0) return true;  // cannot tell: assume alive, the timeout still holds
  return fl.l_type != F_UNLCK;
}

int proc_self_pid() {
  char buf[32];
  const ssize_t n = ::readlink("/proc/self", buf, sizeof(buf) - 1);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return std::atoi(buf);
}

}  // namespace shm
}  // namespace distcomm
