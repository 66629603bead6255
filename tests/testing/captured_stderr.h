// This process's stderr (fd 2) into a file while an object lives: what a rank logged.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>

#include "tests/testing/test_files.h"

namespace distcomm {
namespace testing {

class CapturedStderr {
 public:
  CapturedStderr() : path_(temp_path("stderr_" + std::to_string(::getpid()) + "_" + std::to_string(next_id()))) {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    const int fd = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~CapturedStderr() { restore(); }
  CapturedStderr(const CapturedStderr&) = delete;
  CapturedStderr& operator=(const CapturedStderr&) = delete;

  // Ends the capture (stderr is the original again) and returns what was written.
  std::string text() {
    restore();
    return read_file(path_);
  }

 private:
  static int next_id() {
    static std::atomic<int> id{0};
    return id++;
  }
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

// What fn writes to stderr; stderr is restored even when fn throws.
inline std::string stderr_of(const std::function<void()>& fn) {
  CapturedStderr capture;
  fn();
  return capture.text();
}

}  // namespace testing
}  // namespace distcomm
