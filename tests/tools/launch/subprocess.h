// Runs a program for a test and captures its stdout and stderr, with deadlines everywhere so
// that a broken launcher fails the test instead of hanging it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace distcomm {
namespace testing {

struct Finished {
  int status = -1;  // waitpid status; -1 if it had to be killed at the deadline
  bool timed_out = false;
  std::string out;
  std::string err;
};

class Subprocess {
 public:
  // Starts argv[0] (a path) with the current environment plus `extra_env` ("KEY=VALUE").
  explicit Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});
  ~Subprocess();  // kills the process if it still runs
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads output until stdout holds `text` at least `count` times; false at the deadline.
  bool wait_for_stdout(const std::string& text, int count, std::chrono::milliseconds deadline);
  void send_signal(int sig);
  // Reads everything until the process exits; kills it at the deadline.
  Finished finish(std::chrono::milliseconds deadline);

 private:
  // Reads what is ready within `wait`; false once both pipes are closed.
  bool pump(std::chrono::milliseconds wait);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int out_fd_ = -1;
  int err_fd_ = -1;
  Finished result_;
};

// Subprocess(argv).finish(deadline).
Finished run(const std::vector<std::string>& argv, std::chrono::milliseconds deadline = std::chrono::seconds(60),
             const std::vector<std::string>& extra_env = {});

// The exit code of a finished process, -1 if a signal ended it.
int exit_code(const Finished& f);

// The absolute path of a file in the test's runfiles ("tools/launch/launch").
std::string runfile(const std::string& path);

// The lines of text, without their '\n'.
std::vector<std::string> lines_of(const std::string& text);

// Whether a process with this pid exists at all (a zombie counts: it was not reaped).
bool process_exists(pid_t pid);

}  // namespace testing
}  // namespace distcomm
