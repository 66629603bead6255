// Writing a whole string to a file descriptor, for the few places that write to stderr,
// pipes and log files without stdio (rank output, launcher lines, reports from children).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace distcomm {

// Writes all of text: short writes are continued, EINTR retried; gives up at the first
// error (a closed pipe) and returns false. A text of up to PIPE_BUF bytes written to a
// pipe goes in one write(), so lines from processes sharing it never interleave.
inline bool write_fully(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace distcomm
