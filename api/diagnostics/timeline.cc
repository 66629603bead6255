#include "api/diagnostics/timeline.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "api/errors.h"
#include "api/process/failure_report.h"
#include "api/diagnostics/json_text.h"
#include "api/logging.h"
#include "api/process/write_fully.h"
#include "api/store/internal/file_lock.h"

namespace distcomm {
namespace {

// Events held in memory before they are appended on the way (a long job's memory stays
// bounded): an event is ~250 bytes of text, so ~5-10 MB with the allocator's share. 100,000
// held 50-110 MB of a rank's memory (an outside user's soak). An append takes the file's
// lock and writes ~5 MB, once per 20,000 ops.
constexpr size_t kFlushEvery = 20000;
constexpr char kTail[] = "\n]}\n";
// What replaces the old tail once the events after it are written: as long as kTail, so that
// the overwrite needs no new room on the disk; the events stay one a line.
constexpr char kJoin[] = ",  \n";
static_assert(sizeof(kJoin) == sizeof(kTail), "the join overwrites the tail in place");
// How long a flush waits for another rank to let go of the file: far longer than the ranks
// of a job appending their events in turn take, so only a stopped rank's lock ends it.
constexpr std::chrono::seconds kLockWait{30};

struct Events {
  std::mutex mu;
  std::vector<std::string> pending;
  std::set<std::pair<int, std::string>> named;  // (rank, lane) whose names were written
  std::set<int> named_ranks;
};

Events& events() {
  static Events* e = new Events;  // never destroyed: the exit flush may run after static destruction
  return *e;
}

// The file and its run, set once per process (timeline_configure); read without a lock
// once `configured` says they are there, since they never change after.
struct Target {
  std::once_flag once;
  std::atomic<bool> configured{false};
  std::string path;
  std::string run_id;
};

Target& target() {
  static Target* t = new Target;  // never destroyed, like events()
  return *t;
}

const std::string& timeline_path() {
  static const std::string none;
  return target().configured.load(std::memory_order_acquire) ? target().path : none;
}

// A lane's thread id: the same on every rank for the same name, so that a group's row
// lines up across ranks.
uint64_t lane_id(const std::string& lane) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : lane) h = (h ^ c) * 1099511628211ULL;
  return h % 1000000;
}

std::string microseconds(int64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000 < 0 ? -(ns % 1000) : ns % 1000));
  return buf;
}

// The process that recorded the events: a child forked after them holds copies of the
// parent's, which its exit must not append a second time under the parent's ranks.
std::atomic<pid_t> g_recording_pid{0};

void flush_at_exit() {
  if (::getpid() != g_recording_pid.load()) return;
  try {
    timeline_flush();
  } catch (const std::exception& e) {
    log_line(std::string("distcomm: ") + e.what());  // what() begins with "timeline: "
  }
}

// Names the rank's process and the lane's thread the first time they appear.
void name_locked(Events& ev, int rank, const std::string& lane) {
  if (ev.named_ranks.insert(rank).second) {
    static bool exit_flush = (g_recording_pid.store(::getpid()), std::atexit(flush_at_exit), true);
    (void)exit_flush;
    const std::string pid = std::to_string(rank);
    ev.pending.push_back("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"args\":{\"name\":" +
                         json_quote("rank " + pid) + "}}");
    ev.pending.push_back("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
                         ",\"args\":{\"sort_index\":" + pid + "}}");
  }
  if (ev.named.emplace(rank, lane).second) {
    ev.pending.push_back("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(rank) +
                         ",\"tid\":" + std::to_string(lane_id(lane)) + ",\"args\":{\"name\":" + json_quote(lane) + "}}");
  }
}

void add(int rank, const std::string& lane, std::string event) {
  Events& ev = events();
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(ev.mu);
    name_locked(ev, rank, lane);
    ev.pending.push_back(std::move(event));
    full = ev.pending.size() >= kFlushEvery;
  }
  if (full) flush_at_exit();
}

std::string common(int rank, const std::string& lane, const std::string& name, const char* phase, int64_t ts_ns) {
  return "{\"ph\":\"" + std::string(phase) + "\",\"name\":" + json_quote(name) + ",\"pid\":" + std::to_string(rank) +
         ",\"tid\":" + std::to_string(lane_id(lane)) + ",\"ts\":" + microseconds(ts_ns);
}

std::string read_at(int fd, size_t n, off_t at) {
  std::string s(n, '\0');
  const ssize_t got = ::pread(fd, s.data(), n, at);
  s.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return s;
}

bool write_at(int fd, const std::string& text, off_t at) {
  return ::lseek(fd, at, SEEK_SET) == at && write_fully(fd, text);
}

// The file, opened and locked. A rank that found it damaged renames it aside while others
// wait for its lock: they then hold the lock of the file set aside, and open the path again.
int open_locked(const std::string& path, size_t events) {
  const auto deadline = std::chrono::steady_clock::now() + kLockWait;
  for (int round = 0;; ++round) {
    if (round == 100) throw Error("timeline: " + path + " was replaced 100 times while this process waited for it");
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("timeline: cannot open " + path + " (" + kTimelineVariable + "): " + std::strerror(errno));
    // Ranks of a job append to one file in turn; one stopped while it holds the lock must not
    // hold the others' exit for good.
    const internal::FileLockResult locked = internal::flock_until(fd, true, deadline);
    const int err = errno;
    struct stat held, named;
    if (locked == internal::FileLockResult::kLocked && ::fstat(fd, &held) == 0 &&
        ::stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
      return fd;
    }
    ::close(fd);
    switch (locked) {
      case internal::FileLockResult::kLocked:
        continue;  // set aside (or removed) while this process waited: the path names another file now
      case internal::FileLockResult::kFailed:
        throw Error("timeline: cannot lock " + path + ": " + std::strerror(err));
      case internal::FileLockResult::kTimedOut:
        throw Error("timeline: " + path + " stayed locked by another process for " +
                    std::to_string(kLockWait.count()) + " s; " + std::to_string(events) +
                    " events of this process are left out");
    }
  }
}

// Where the first tail after the head begins, or -1. An event is one line (json_quote
// escapes newlines), so kTail, which begins with a newline and a ']', is never inside one.
off_t first_tail(int fd, size_t from, size_t size) {
  constexpr size_t kChunk = 1 << 20;
  const size_t tail_len = sizeof(kTail) - 1;
  for (size_t at = from; at < size; at += kChunk) {
    const std::string chunk = read_at(fd, std::min(kChunk + tail_len - 1, size - at), static_cast<off_t>(at));
    const size_t found = chunk.find(kTail);
    if (found != std::string::npos) return static_cast<off_t>(at + found);
    if (chunk.size() < tail_len) break;
  }
  return -1;
}

// Keeps a file that is not a timeline of this run nor of another (damaged: by a writer of
// an older version, by hand) under a name of its own, and says which.
void set_aside(const std::string& path) {
  const std::string aside = path + ".damaged." + std::to_string(::time(nullptr)) + "." + std::to_string(::getpid());
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    throw Error("timeline: " + path + " is not a whole timeline and cannot be set aside as " + aside + ": " +
                std::strerror(errno) + "; it is left as it is, without this process's events");
  }
  log_line("distcomm: timeline: " + path + " was not a whole timeline (a writer stopped part way?); kept as " +
           aside + ", and a new timeline begun at " + path);
}

// Whether the file is a whole timeline of another run (another DISTCOMM_RUN_ID): replaced.
bool another_runs(int fd, size_t size) {
  static const std::string start = "{\"otherData\":{\"run_id\":";
  const size_t tail_len = sizeof(kTail) - 1;
  return size > start.size() + tail_len && read_at(fd, start.size(), 0) == start &&
         read_at(fd, tail_len, static_cast<off_t>(size - tail_len)) == kTail;
}

// Appends body (events joined by ",\n") to the locked file, so that whatever happens part
// way the file keeps every event appended before: the events go after the old tail first
// (on failure the file is cut back to its old size), and only then is the old tail, 4
// bytes within the file, overwritten with a comma. Returns false when it set the file aside
// (the caller opens the path again).
bool append_events(int fd, const std::string& path, const std::string& head, const std::string& body,
                   size_t events) {
  const size_t tail_len = sizeof(kTail) - 1;
  struct stat st;
  if (::fstat(fd, &st) != 0) throw Error("timeline: cannot stat " + path + ": " + std::strerror(errno));
  const size_t size = static_cast<size_t>(st.st_size);
  const std::string start = read_at(fd, head.size(), 0);
  size_t committed = 0;  // the end of the whole document of this run already there (0: none)
  if (start == head && size > head.size() + tail_len) {
    if (read_at(fd, tail_len, static_cast<off_t>(size - tail_len)) == kTail) {
      committed = size;
    } else {
      // A writer stopped part way (SIGKILL) after its events went past the old tail: the
      // document ends at the first tail, and what follows it never belonged to it.
      const off_t tail = first_tail(fd, head.size(), size);
      if (tail < 0) {
        set_aside(path);
        return false;
      }
      committed = static_cast<size_t>(tail) + tail_len;
      if (::ftruncate(fd, static_cast<off_t>(committed)) != 0) {
        throw Error("timeline: cannot cut the unfinished append off " + path + ": " + std::strerror(errno));
      }
      log_line("distcomm: timeline: " + path + " ended in an unfinished append (its writer stopped part way); its " +
               std::to_string(size - committed) + " bytes were dropped, the events before them kept");
      if (committed <= head.size() + tail_len) committed = 0;  // no event: begun anew
    }
  } else if (size > 0 && start != head.substr(0, start.size()) && !another_runs(fd, size)) {
    set_aside(path);
    return false;
  }
  // Else nothing of this run's is there: an empty file, another run's timeline (replaced),
  // or the start of this run's head without an event (a first append that failed).
  bool ok;
  if (committed == 0) {
    ok = ::ftruncate(fd, 0) == 0 && write_at(fd, head + body + kTail, 0);
  } else {
    ok = write_at(fd, body + kTail, static_cast<off_t>(committed)) &&
         write_at(fd, kJoin, static_cast<off_t>(committed - tail_len));
  }
  if (!ok) {
    const int err = errno;
    const bool restored = ::ftruncate(fd, static_cast<off_t>(committed)) == 0 &&
                          (committed == 0 || write_at(fd, kTail, static_cast<off_t>(committed - tail_len)));
    throw Error("timeline: cannot write " + path + ": " + std::strerror(err) + "; " + std::to_string(events) +
                " events of this process are left out" +
                (restored ? std::string(committed ? ", the events before them kept" : "")
                          : ", and the file could not be restored"));
  }
  return true;
}

}  // namespace

void timeline_configure(const std::string& file, const std::string& run_id) {
  Target& t = target();
  std::call_once(t.once, [&] {
    t.path = file;
    t.run_id = run_id;
    t.configured.store(true, std::memory_order_release);
  });
}

bool timeline_enabled() { return !timeline_path().empty(); }

int64_t timeline_now_ns() { return FailureReport::now_ns(); }

void timeline_complete(int rank, const std::string& lane, const std::string& name, int64_t start_ns, int64_t end_ns,
                       const std::string& args) {
  if (!timeline_enabled()) return;
  add(rank, lane,
      common(rank, lane, name, "X", start_ns) + ",\"dur\":" + microseconds(end_ns - start_ns) + ",\"args\":{" + args +
          "}}");
}

void timeline_instant(int rank, const std::string& lane, const std::string& name, int64_t at_ns,
                      const std::string& args) {
  if (!timeline_enabled()) return;
  add(rank, lane, common(rank, lane, name, "i", at_ns) + ",\"s\":\"t\",\"args\":{" + args + "}}");
}

void timeline_async_span(int rank, const std::string& lane, const std::string& name, int64_t start_ns,
                         int64_t end_ns, const std::string& args) {
  if (!timeline_enabled()) return;
  static std::atomic<uint64_t> next_id{0};
  const std::string id = ",\"cat\":\"distcomm\",\"id\":" + std::to_string(next_id++);
  add(rank, lane, common(rank, lane, name, "b", start_ns) + id + ",\"args\":{" + args + "}}");
  add(rank, lane, common(rank, lane, name, "e", end_ns) + id + "}");
}

void timeline_flush() {
  if (!timeline_enabled()) return;
  std::vector<std::string> batch;
  {
    Events& ev = events();
    std::lock_guard<std::mutex> lock(ev.mu);
    batch.swap(ev.pending);
  }
  if (batch.empty()) return;
  std::string body;
  for (size_t i = 0; i < batch.size(); ++i) body += (i ? ",\n" : "") + batch[i];

  const std::string& path = timeline_path();
  const std::string head = "{\"otherData\":{\"run_id\":" + json_quote(target().run_id) + "},\"traceEvents\":[\n";
  // A damaged file set aside leaves the path to a new file: the next round opens that one.
  for (int round = 0; round < 3; ++round) {
    const int fd = open_locked(path, batch.size());
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }  // also drops the lock
    } closer{fd};
    if (append_events(fd, path, head, body, batch.size())) return;
  }
  throw Error("timeline: " + path + " was found damaged again after it was set aside; " +
              std::to_string(batch.size()) + " events of this process are left out");
}

}  // namespace distcomm
