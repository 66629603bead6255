// Moving the ranks' output to the terminal and the log files, one whole line at a time.
//
// The launcher reads every rank's stdout and stderr pipe itself (one thread, poll), cuts
// the bytes into lines and writes each line with a single write(): lines of different
// ranks never mix, whatever sizes the ranks write in.
#pragma once

#include <poll.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "launch/launch_options.h"

namespace distcomm {
namespace launch {

enum class Stream { kStdout, kStderr };

// Cuts a byte stream into lines. An unfinished line waits for its newline, unless it grows
// past max_line (a program that never prints '\n' must not make the launcher hoard memory).
class LineSplitter {
 public:
  using Emit = std::function<void(std::string_view line)>;
  explicit LineSplitter(size_t max_line = 1 << 20) : max_line_(max_line) {}
  // Calls emit for each line completed by these bytes (without its '\n').
  void feed(const char* data, size_t n, const Emit& emit);
  // End of stream: emits the unfinished line, if any.
  void finish(const Emit& emit);

 private:
  size_t max_line_;
  std::string pending_;
};

// Where a line goes: the terminal (prefixed, if its rank passes the filter) and the rank's
// log file.
class OutputRouter {
 public:
  // Creates options.log_dir and one file per local rank, when log_dir is set. Throws
  // std::runtime_error naming the path if it cannot.
  OutputRouter(const LaunchOptions& options, int terminal_out = 1, int terminal_err = 2);
  ~OutputRouter();
  OutputRouter(const OutputRouter&) = delete;
  OutputRouter& operator=(const OutputRouter&) = delete;

  void route(int rank, Stream stream, std::string_view line);
  // "<log_dir>/rank_<R>.log", or "" without log_dir.
  std::string log_path(int rank) const;

 private:
  bool to_terminal(int rank) const;

  const LaunchOptions options_;
  int terminal_out_;
  int terminal_err_;
  std::map<int, int> log_fds_;  // global rank -> file
};

// Reads the pipes of all ranks and hands their lines to a router.
class OutputPump {
 public:
  explicit OutputPump(OutputRouter& router) : router_(router) {}
  ~OutputPump();
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // Takes ownership of fd.
  void add(int fd, int rank, Stream stream);
  // The pipes still open, for poll().
  std::vector<pollfd> poll_set() const;
  // Reads what fd has; at end of stream emits the last partial line and closes it.
  void read_from(int fd);
  bool all_closed() const { return sources_.empty(); }
  // Emits partial lines and closes every pipe (for output of processes that outlive the job).
  void close_all();

 private:
  struct Source {
    int rank;
    Stream stream;
    LineSplitter splitter;
  };
  void close_source(int fd);

  OutputRouter& router_;
  std::map<int, Source> sources_;  // by fd
};

}  // namespace launch
}  // namespace distcomm
