#include "launch/output_pump.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "api/process/write_fully.h"

namespace distcomm {
namespace launch {
namespace {

// mkdir -p: the log folder may be several levels new.
void make_dirs(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create log folder " + prefix + ": " + std::strerror(errno));
    }
  }
}

// A line that already says which rank it is about: distcomm's own "[rank R/W] " (log_line,
// ordered_print) or another launcher's "[rank R] ". Adding the launcher's prefix to it would
// give the line two, and the second one names the rank that printed it (rank 0 prints
// every rank's line of an ordered_print), not the rank it is about.
bool has_rank_prefix(std::string_view line) {
  constexpr std::string_view kOpen = "[rank ";
  if (line.substr(0, kOpen.size()) != kOpen) return false;
  size_t i = kOpen.size();
  const size_t digits_start = i;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  return i > digits_start && i < line.size() && (line[i] == ']' || line[i] == '/');
}

}  // namespace

void LineSplitter::feed(const char* data, size_t n, const Emit& emit) {
  const char* end = data + n;
  while (data < end) {
    const char* nl = static_cast<const char*>(std::memchr(data, '\n', end - data));
    if (nl == nullptr) {
      pending_.append(data, end);
      break;
    }
    if (pending_.empty()) {
      emit(std::string_view(data, nl - data));
    } else {
      pending_.append(data, nl);
      emit(pending_);
      pending_.clear();
    }
    data = nl + 1;
  }
  while (pending_.size() >= max_line_) {
    emit(std::string_view(pending_).substr(0, max_line_));
    pending_.erase(0, max_line_);
  }
}

void LineSplitter::finish(const Emit& emit) {
  if (!pending_.empty()) emit(pending_);
  pending_.clear();
}

TerminalWriter::TerminalWriter(int fd, size_t capacity) : fd_(fd), capacity_(capacity) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    ::close(wake_fd_);
    throw;
  }
}

TerminalWriter::~TerminalWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  queued_.notify_one();
  thread_.join();
  ::close(wake_fd_);
}

void TerminalWriter::write(std::string text) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return;
    bytes_ += text.size();
    queue_.push_back(std::move(text));
  }
  queued_.notify_one();
}

bool TerminalWriter::full() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_ >= capacity_;
}

void TerminalWriter::clear_wake() {
  uint64_t count;
  ssize_t ignored = ::read(wake_fd_, &count, sizeof(count));  // EAGAIN: nothing to clear
  (void)ignored;
}

void TerminalWriter::run() noexcept {
  // Nothing may escape a thread; should anything throw all the same, the lines are dropped
  // from then on (broken_), so that the polling thread never waits for this one.
  try {
    while (true) {
      std::string text;
      {
        std::unique_lock<std::mutex> lock(mu_);
        queued_.wait(lock, [this] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;  // closing, and all written
        text = std::move(queue_.front());
        queue_.pop_front();
      }
      // Blocks while the reader does not read: only this thread waits for it. A reader gone
      // (EPIPE; the launcher ignores SIGPIPE) drops the line: `launch ... | head` goes on.
      write_fully(fd_, text);
      bool caught_up;
      {
        std::lock_guard<std::mutex> lock(mu_);
        caught_up = bytes_ >= capacity_ && bytes_ - text.size() < capacity_;
        bytes_ -= text.size();
      }
      if (caught_up) {
        const uint64_t one = 1;
        ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));  // wakes the poll waiting on it
        (void)ignored;
      }
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    queue_.clear();
    bytes_ = 0;
    const uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));
    (void)ignored;
  }
}

OutputRouter::OutputRouter(const LaunchOptions& options, int terminal_out, int terminal_err)
    : options_(options),
      out_(std::make_unique<TerminalWriter>(terminal_out)),
      err_(std::make_unique<TerminalWriter>(terminal_err)) {
  if (options_.log_dir.empty()) return;
  make_dirs(options_.log_dir);
  for (int local = 0; local < options_.nproc_per_node; ++local) {
    int rank = options_.global_rank(local);
    std::string path = log_path(rank);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot create log file " + path + ": " + std::strerror(errno));
    log_fds_[rank] = fd;
  }
}

OutputRouter::~OutputRouter() {
  for (auto& kv : log_fds_) ::close(kv.second);
}

std::string OutputRouter::log_path(int rank) const {
  if (options_.log_dir.empty()) return "";
  return options_.log_dir + "/rank_" + std::to_string(rank) + ".log";
}

bool OutputRouter::to_terminal(int rank) const {
  if (!options_.log_dir.empty() && !options_.tee) return false;
  return options_.ranks_filter.empty() || options_.ranks_filter.count(rank) > 0;
}

void OutputRouter::route(int rank, Stream stream, std::string_view line) {
  auto log = log_fds_.find(rank);
  if (log != log_fds_.end()) {
    std::string text(line);
    text += '\n';
    write_fully(log->second, text);
  }
  if (!to_terminal(rank)) return;
  std::string text = options_.prefix_output && !has_rank_prefix(line) ? "[rank " + std::to_string(rank) + "] " : "";
  text.append(line);
  text += '\n';
  writer(stream).write(std::move(text));
}

OutputPump::~OutputPump() { close_all(); }

void OutputPump::add(int fd, int rank, Stream stream) { sources_.emplace(fd, Source{rank, stream, LineSplitter()}); }

std::vector<pollfd> OutputPump::poll_set() const {
  std::vector<pollfd> set;
  bool wait_for[2] = {false, false};  // by Stream: its reader is behind
  for (const auto& kv : sources_) {
    const Stream stream = kv.second.stream;
    if (router_.held_back(stream)) {
      wait_for[static_cast<int>(stream)] = true;
    } else {
      set.push_back(pollfd{kv.first, POLLIN, 0});
    }
  }
  for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
    if (wait_for[static_cast<int>(stream)]) set.push_back(pollfd{router_.wake_fd(stream), POLLIN, 0});
  }
  return set;
}

bool OutputPump::held_back() const {
  for (const auto& kv : sources_) {
    if (router_.held_back(kv.second.stream)) return true;
  }
  return false;
}

void OutputPump::on_ready(int fd) {
  for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
    if (fd == router_.wake_fd(stream)) {
      router_.clear_wake(stream);  // the next poll_set() asks held_back() again
      return;
    }
  }
  auto it = sources_.find(fd);
  if (it == sources_.end()) return;
  Source& s = it->second;
  auto emit = [this, &s](std::string_view line) { router_.route(s.rank, s.stream, line); };
  ssize_t n;
  do {
    n = ::read(fd, read_buffer_.data(), read_buffer_.size());
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    s.splitter.feed(read_buffer_.data(), static_cast<size_t>(n), emit);
    return;
  }
  close_source(fd);  // end of stream (or a read error, which ends it as well)
}

void OutputPump::close_source(int fd) {
  auto it = sources_.find(fd);
  if (it == sources_.end()) return;
  Source& s = it->second;
  s.splitter.finish([this, &s](std::string_view line) { router_.route(s.rank, s.stream, line); });
  ::close(fd);
  sources_.erase(it);
}

void OutputPump::close_all() {
  while (!sources_.empty()) close_source(sources_.begin()->first);
}

}  // namespace launch
}  // namespace distcomm
