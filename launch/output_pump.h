// Moving the ranks' output to the terminal and the log files, one whole line at a time.
//
// The launcher reads every rank's stdout and stderr pipe itself (one thread, poll), cuts
// the bytes into lines and writes each line with a single write(): lines of different
// ranks never mix, whatever sizes the ranks write in.
//
// The lines for the launcher's own stdout and stderr are written by a thread per stream
// (TerminalWriter), never by the thread that polls: a reader that stops reading (a paused
// `| less`) must not stop the launcher from handling signals and rank exits, as torchrun's
// monitor loop never waits for its output either. While such a reader is behind, the
// ranks' pipes of that stream are not read (OutputPump::poll_set): the ranks wait in their
// own writes, as they would writing to that terminal themselves, and memory stays bounded.
#pragma once

#include <poll.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
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

// Writes whole lines to one file descriptor (the launcher's stdout or stderr) from a thread
// of its own, in the order queued, each in one write() (lines up to PIPE_BUF stay whole
// beside other writers of the same pipe). The fd stays blocking: it is the shell's, shared
// with other programs, and O_NONBLOCK on it would make their writes fail. A write that
// fails (the reader went away: EPIPE) drops its line, as before; nothing else is lost.
class TerminalWriter {
 public:
  explicit TerminalWriter(int fd, size_t capacity = 1 << 20);
  // Waits until every queued line is written (or dropped): the launcher's last lines get
  // out when a stalled reader comes back.
  ~TerminalWriter();
  TerminalWriter(const TerminalWriter&) = delete;
  TerminalWriter& operator=(const TerminalWriter&) = delete;

  // Queues a line (with its '\n'); never blocks, also when full().
  void write(std::string text);
  // Holding capacity bytes or more not yet written: the reader is behind.
  bool full() const;
  // Readable after the writer stopped being full(); poll it while full(), then clear_wake().
  int wake_fd() const { return wake_fd_; }
  void clear_wake();

 private:
  void run() noexcept;

  const int fd_;
  const size_t capacity_;
  int wake_fd_ = -1;  // an eventfd
  mutable std::mutex mu_;
  std::condition_variable queued_;
  std::deque<std::string> queue_;
  size_t bytes_ = 0;     // queued or being written
  bool closing_ = false;
  bool broken_ = false;  // the thread failed (cannot happen short of running out of memory): lines are dropped
  std::thread thread_;
};

// Where a line goes: the terminal (prefixed, if its rank passes the filter) and the rank's
// log file.
class OutputRouter {
 public:
  // Creates options.log_dir and one file per local rank, when log_dir is set. Throws
  // std::runtime_error naming the path if it cannot.
  OutputRouter(const LaunchOptions& options, int terminal_out = 1, int terminal_err = 2);
  // Waits until the terminal lines are written (TerminalWriter).
  ~OutputRouter();
  OutputRouter(const OutputRouter&) = delete;
  OutputRouter& operator=(const OutputRouter&) = delete;

  // Never blocks on the terminal: its lines are queued (TerminalWriter). Log files are
  // written at once.
  void route(int rank, Stream stream, std::string_view line);
  // The launcher's own line ("<tag>: ...") to its stderr, after the ranks' lines before it.
  void say(std::string_view line) { writer(Stream::kStderr).write(std::string(line) + '\n'); }
  // The terminal's reader of this stream is behind: read no more of the ranks' pipes of it.
  bool held_back(Stream stream) const { return writer(stream).full(); }
  // Readable once held_back(stream) may have ended (TerminalWriter::wake_fd).
  int wake_fd(Stream stream) const { return writer(stream).wake_fd(); }
  void clear_wake(Stream stream) { writer(stream).clear_wake(); }
  // "<log_dir>/rank_<R>.log", or "" without log_dir.
  std::string log_path(int rank) const;

 private:
  bool to_terminal(int rank) const;
  TerminalWriter& writer(Stream stream) const { return stream == Stream::kStdout ? *out_ : *err_; }

  const LaunchOptions options_;
  std::map<int, int> log_fds_;  // global rank -> file
  std::unique_ptr<TerminalWriter> out_;
  std::unique_ptr<TerminalWriter> err_;
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
  // For poll(): the pipes still open, but not those of a stream whose terminal reader is
  // behind (OutputRouter::held_back); for such a stream, the fd that says it caught up.
  std::vector<pollfd> poll_set() const;
  // Handles an fd of poll_set() that poll() found ready: reads what a pipe has (at end of
  // stream emits the last partial line and closes it), or takes note of a caught-up reader.
  void on_ready(int fd);
  // Some pipes are left unread because their terminal's reader is behind.
  bool held_back() const;
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
  // On the heap, not on_ready's stack: the launcher runs on the main thread, and must work
  // with a small stack (ulimit -s 64).
  std::vector<char> read_buffer_ = std::vector<char>(65536);
};

}  // namespace launch
}  // namespace distcomm
