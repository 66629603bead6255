// Runs a program for a test and captures its output, with deadlines everywhere so that a
// broken program fails the test instead of hanging it. The program leads a process group
// of its own, and at the deadline the whole group is killed (ranks it started included).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/testing/test_files.h"

namespace distcomm {
namespace testing {

struct Finished {
  int status = -1;  // waitpid status; -1 if it had to be killed at the deadline
  bool timed_out = false;
  std::string out;
  std::string err;  // empty when stderr was merged into out
};

// Where a Subprocess's stderr goes instead of a pipe: a file (created or truncated), which a
// test can read while the program runs; Finished::err stays empty.
struct StderrToFile {
  std::string path;
};

class Subprocess {
 public:
  // Starts argv[0] (a path, or a name looked up in $PATH) with the current environment
  // plus `extra_env` ("KEY=VALUE"). merge_stderr: stderr goes into out, in the order written.
  explicit Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
                      bool merge_stderr = false);
  Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env, const StderrToFile& err);
  ~Subprocess();  // kills the process group if the process still runs
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads output until stdout holds `text` at least `count` times; false at the deadline.
  bool wait_for_stdout(const std::string& text, int count, std::chrono::milliseconds deadline);
  void send_signal(int sig);
  // What stdout said so far (what wait_for_stdout read).
  const std::string& stdout_so_far() const { return result_.out; }
  // Bytes the program wrote to stdout that nobody has read yet (its pipe holds ~64 KiB: a
  // program that writes more blocks until the test reads, which finish() does).
  size_t stdout_unread() const;
  // Reads everything until the process exits; kills its group at the deadline.
  Finished finish(std::chrono::milliseconds deadline);

 private:
  // Forks and execs argv with stdout to a pipe and stderr to err_target (a pipe's write end,
  // or a file); err_read: the read end kept here, or -1.
  void start(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env, int err_target,
             int err_read);
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
// As a shell reports it: the exit code, or 128 + the signal that ended it; -1 when the
// deadline ended it.
int shell_exit_code(const Finished& f);

// A program run as a user would, stdout and stderr together in the order written.
struct ProgramOutcome {
  int exit_code = -1;  // 128 + signal when a signal ended it (or the deadline)
  std::string output;
};
ProgramOutcome run_program(const std::vector<std::string>& argv, int timeout_s = 120,
                           const std::vector<std::string>& extra_env = {});

// The lines of text, without their '\n'.
std::vector<std::string> lines_of(const std::string& text);

// Whether a process with this pid exists at all (a zombie counts: it was not reaped).
bool process_exists(pid_t pid);

// Whether an executable of this name is in $PATH.
bool on_path(const std::string& program);

}  // namespace testing
}  // namespace distcomm
