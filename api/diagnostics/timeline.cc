#include "api/diagnostics/timeline.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
    log_line(std::string("distcomm: timeline: ") + e.what());
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

std::string read_head(int fd, size_t n) {
  std::string s(n, '\0');
  const ssize_t got = ::pread(fd, s.data(), n, 0);
  s.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return s;
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
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("timeline: cannot open " + path + " (" + kTimelineVariable + "): " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }  // also drops the lock
  } closer{fd};
  // Ranks of a job append to one file in turn; one stopped while it holds the lock must not
  // hold the others' exit for good.
  switch (internal::flock_until(fd, true, std::chrono::steady_clock::now() + kLockWait)) {
    case internal::FileLockResult::kLocked:
      break;
    case internal::FileLockResult::kFailed:
      throw Error("timeline: cannot lock " + path + ": " + std::strerror(errno));
    case internal::FileLockResult::kTimedOut:
      throw Error("timeline: " + path + " stayed locked by another process for " +
                  std::to_string(kLockWait.count()) + " s; " + std::to_string(batch.size()) +
                  " events of this process are left out");
  }
  const std::string head = "{\"otherData\":{\"run_id\":" + json_quote(target().run_id) + "},\"traceEvents\":[\n";
  struct stat st;
  if (::fstat(fd, &st) != 0) throw Error("timeline: cannot stat " + path + ": " + std::strerror(errno));
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t tail_len = sizeof(kTail) - 1;
  std::string tail(tail_len, '\0');
  const bool ours = size > head.size() + tail_len && read_head(fd, head.size()) == head &&
                    ::pread(fd, tail.data(), tail_len, static_cast<off_t>(size - tail_len)) ==
                        static_cast<ssize_t>(tail_len) &&
                    tail == kTail;
  bool ok;
  if (ours) {
    // Over the old tail: the document is whole again once this write is.
    ok = ::lseek(fd, static_cast<off_t>(size - tail_len), SEEK_SET) >= 0 && write_fully(fd, ",\n" + body + kTail);
  } else {
    ok = ::ftruncate(fd, 0) == 0 && ::lseek(fd, 0, SEEK_SET) == 0 && write_fully(fd, head + body + kTail);
  }
  if (!ok) throw Error("timeline: cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace distcomm
