// This process's stderr (fd 2) into a file while an object lives: what a rank logged.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

#include "tests/testing/test_files.h"

namespace distcomm {
namespace testing {

class CapturedStderr {
 public:
  // The file is unlinked as soon as it is open: only the descriptor names it, so nothing is
  // left in the temporary folder when the capture ends or the process dies in the middle
  // (ranks that a test kills on purpose capture too; their files once piled up in /tmp).
  CapturedStderr() {
    std::string path = temp_path("stderr_XXXXXX");
    file_ = ::mkstemp(&path[0]);
    if (file_ < 0) return;  // no capture: text() returns "" and stderr stays as it was
    ::unlink(path.c_str());
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(file_, STDERR_FILENO);
  }
  ~CapturedStderr() {
    restore();
    if (file_ >= 0) ::close(file_);
  }
  CapturedStderr(const CapturedStderr&) = delete;
  CapturedStderr& operator=(const CapturedStderr&) = delete;

  // Ends the capture (stderr is the original again) and returns what was written.
  std::string text() {
    restore();
    return so_far();
  }

  // What was written so far, the capture going on (a test waiting for a line to appear).
  std::string so_far() const {
    std::fflush(stderr);
    std::string written;
    if (file_ < 0) return written;
    char chunk[4096];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(file_, chunk, sizeof chunk, at);
      if (n <= 0) break;
      written.append(chunk, static_cast<size_t>(n));
      at += n;
    }
    return written;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  int file_ = -1;
  int saved_ = -1;
};

// What fn writes to stderr; stderr is restored even when fn throws.
inline std::string stderr_of(const std::function<void()>& fn) {
  CapturedStderr capture;
  fn();
  return capture.text();
}

// This process's stderr into `path` for good (a rank whose last words a test reads after it
// ended). False when the file cannot be opened or made stderr.
inline bool redirect_stderr(const std::string& path) {
  std::fflush(stderr);
  const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (file < 0) return false;
  const bool moved = ::dup2(file, STDERR_FILENO) >= 0;
  ::close(file);
  return moved;
}

}  // namespace testing
}  // namespace distcomm
