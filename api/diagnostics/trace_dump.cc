#include "api/diagnostics/trace_dump.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "api/errors.h"
#include "api/store/internal/timed_lock.h"
#include "api/process/failure_report.h"
#include "api/diagnostics/json_text.h"
#include "api/logging.h"
#include "api/process/make_folders.h"
#include "api/process/thread_start.h"
#include "api/plugin/plugin.h"
#include "api/diagnostics/timeline.h"
#include "api/process/write_fully.h"

namespace distcomm {
namespace {

// Says what went wrong where it can: the words are built inside the try, as a handler's own
// allocation can fail in the very state that brought it there (no memory, ulimit -v), and
// nothing may leave these threads (std::terminate) nor skip what follows the handler.
template <typename Words>
void say_if_possible(Words words) noexcept {
  try {
    log_line(words());
  } catch (...) {
  }
}

// Recorders kept after their group is gone, for the exit dump: enough for a program's
// groups; a test that makes thousands of groups does not keep them all.
constexpr size_t kKeptAfterGroup = 64;

struct Registry {
  std::mutex mu;
  std::vector<std::weak_ptr<FlightRecorder>> live;
  std::vector<std::shared_ptr<FlightRecorder>> kept;  // only with DISTCOMM_TRACE_DIR
  std::set<const FlightRecorder*> dumped_on_failure;
  pid_t set_up_in = 0;  // the process whose SIGUSR1 thread runs (a fork child sets up again)
  int wake_fd[2] = {-1, -1};
  // The folders and rank of the dumps, as the last group registered read them
  // (register_for_dumps). The dump thread, which serves the signal handler, uses these:
  // nothing here reads the environment, which a dump at exit or after a signal could not
  // do safely anyway.
  TraceSettings settings;
};

// Never destroyed: the exit dump and the SIGUSR1 thread may use it during static
// destruction.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// The signals that ask for a dump: SIGUSR1 (dump and go on) and, with DISTCOMM_TRACE_DIR set,
// SIGTERM (dump, then end as SIGTERM would). One mechanism for both: the handler does only
// what is async-signal-safe -- it writes the signal's number as one byte to a pipe -- and
// the dump thread, reading the pipe, does the rest.
std::atomic<int> g_signal_write_fd{-1};
std::atomic<pid_t> g_signal_pid{0};       // the process whose dump thread reads the pipe
std::atomic<int> g_terms_received{0};

// The signals that stop the process after its dump and timeline: SIGTERM (any launcher's
// stop) and SIGINT (a Ctrl-C, which tools/launch passes on to its ranks as torchrun does).
bool is_stop_signal(int sig) { return sig == SIGTERM || sig == SIGINT; }

// Ends the process as sig's default action does (the exit status says "terminated" for
// SIGTERM, "interrupt" for SIGINT): async-signal-safe, so the handler may call it too.
void terminate_by_signal(int sig) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
  ::raise(sig);   // delivered now, or when a handler running it returns
}

void on_dump_signal(int sig) {
  const int saved = errno;
  const bool ours = ::getpid() == g_signal_pid.load();
  // A stop signal in a fork child without the dump thread, or a second one while the first
  // one's dump is written: no waiting, it ends now.
  if (is_stop_signal(sig) && (!ours || g_terms_received.fetch_add(1) > 0)) {
    terminate_by_signal(sig);
  } else if (ours) {
    const int fd = g_signal_write_fd.load();
    if (fd >= 0) {
      const char byte = static_cast<char>(sig);
      // A full pipe already holds a request of the same kind (or the thread is gone: a stop
      // signal then goes on as if unhandled).
      if (::write(fd, &byte, 1) != 1 && is_stop_signal(sig)) terminate_by_signal(sig);
    }
  }
  errno = saved;
}

TraceSettings settings() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.settings;
}

// Dumps on failure, at exit and on SIGTERM are asked for by setting DISTCOMM_TRACE_DIR.
bool dumps_asked_for() { return !settings().dump_dir.empty(); }

std::string dump_dir() {
  const TraceSettings s = settings();
  return s.dump_dir.empty() ? s.default_dump_dir : s.dump_dir;
}

std::vector<std::shared_ptr<FlightRecorder>> recorders() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::shared_ptr<FlightRecorder>> out;
  for (const auto& w : r.live) {
    if (auto p = w.lock()) out.push_back(std::move(p));
  }
  return out;
}

// This process's rank in the world: RANK when the launcher set it, else the world rank of
// this process in its first group.
int process_rank(const std::vector<std::shared_ptr<FlightRecorder>>& recs) {
  const int launcher_rank = settings().launcher_rank;
  if (launcher_rank != -1) return launcher_rank;
  for (const auto& rec : recs) {
    const TraceGroupInfo info = rec->info();
    if (info.rank >= 0 && static_cast<size_t>(info.rank) < info.global_ranks.size()) {
      return info.global_ranks[static_cast<size_t>(info.rank)];
    }
  }
  return -1;
}

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string entry_json(const TraceEntry& e) {
  const OpFingerprint& f = e.fingerprint;
  std::string s = "{\"id\":" + std::to_string(e.id) + ",\"op\":" + json_quote(op_type_name(f.op)) +
                  ",\"seq\":" + std::to_string(f.seq) + ",\"kind\":" +
                  json_quote(f.p2p ? "p2p" : f.internal ? "internal" : "collective") +
                  ",\"state\":" + json_quote(trace_state_name(e.state)) +
                  ",\"queued_ns\":" + std::to_string(e.queued_ns) + ",\"started_ns\":" + std::to_string(e.started_ns) +
                  ",\"ended_ns\":" + std::to_string(e.ended_ns);
  if (f.has_tensor) {
    s += ",\"dtype\":" + json_quote(dtype_name(f.dtype)) + ",\"count\":" + std::to_string(f.count) +
         ",\"shape\":" + int_list(f.shape());
  }
  if (f.p2p) {
    s += ",\"peer\":" + std::to_string(f.root) + ",\"tag\":" + std::to_string(f.tag);
  } else {
    s += ",\"root\":" + std::to_string(f.root);
  }
  if (f.has_reduction) s += ",\"reduce_op\":" + json_quote(f.reduction.name());
  s += ",\"describe\":" + json_quote(f.describe()) + ",\"fingerprint\":" + json_quote(f.encode());
  if (!e.error.empty()) s += ",\"error\":" + json_quote(e.error);
  return s + "}";
}

std::string group_json(const FlightRecorder& rec) {
  const TraceGroupInfo info = rec.info();
  uint64_t dropped = 0;
  const std::vector<TraceEntry> ops = rec.snapshot(&dropped);
  std::string s = "{\"name\":" + json_quote(info.name) + ",\"rank\":" + std::to_string(info.rank) +
                  ",\"size\":" + std::to_string(info.size) + ",\"global_ranks\":[";
  for (size_t i = 0; i < info.global_ranks.size(); ++i) s += (i ? "," : "") + std::to_string(info.global_ranks[i]);
  s += "],\"backend\":" + json_quote(info.backend) + ",\"versions\":[";
  for (size_t i = 0; i < info.versions.size(); ++i) s += (i ? "," : "") + json_quote(info.versions[i]);
  s += "],\"capacity\":" + std::to_string(rec.capacity()) + ",\"dropped\":" + std::to_string(dropped) + ",\"ops\":[";
  for (size_t i = 0; i < ops.size(); ++i) s += (i ? ",\n  " : "\n  ") + entry_json(ops[i]);
  return s + "]}";
}

std::string groups_json(const std::vector<std::shared_ptr<FlightRecorder>>& recs) {
  std::string s;
  for (size_t i = 0; i < recs.size(); ++i) s += (i ? ",\n" : "\n") + group_json(*recs[i]);
  return s;
}

// The dump's text; *groups (when asked) gets its groups' part.
std::string dump_text(const std::string& reason, const std::vector<std::shared_ptr<FlightRecorder>>& recs,
                      std::string* groups) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string body = groups_json(recs);
  if (groups) *groups = body;
  return "{\"format\":\"distcomm-trace-dump\",\"version\":1,\"rank\":" + std::to_string(process_rank(recs)) +
         ",\"run_id\":" + json_quote(settings().run_id) + ",\"host\":" + json_quote(host) + ",\"pid\":" + std::to_string(::getpid()) +
         ",\"reason\":" + json_quote(reason) + ",\"time_ns\":" + std::to_string(FailureReport::now_ns()) +
         ",\"distcomm_abi\":" +
         json_quote(std::to_string(DISTCOMM_PLUGIN_ABI_MAJOR) + "." + std::to_string(core_abi_minor())) +
         ",\"groups\":[" + body + "]}\n";
}

// What the last dump this process wrote said about its groups, to tell one that would
// repeat it word for word. Never destroyed: dumps happen during exit.
struct LastDump {
  std::mutex mu;
  bool written = false;
  std::string groups;
};
LastDump& last_dump() {
  static LastDump* d = new LastDump;
  return *d;
}

void remember_dump(const std::string& groups) {
  LastDump& d = last_dump();
  std::lock_guard<std::mutex> lock(d.mu);
  d.written = true;
  d.groups = groups;
}

bool same_as_last_dump() {
  const std::string now = groups_json(recorders());
  LastDump& d = last_dump();
  std::lock_guard<std::mutex> lock(d.mu);
  return d.written && d.groups == now;
}

// A failed op's error type, from its text ("distcomm::Timeout: ...").
bool dumps_on_failure(const std::string& error) {
  for (const char* type : {"distcomm::Timeout:", "distcomm::PeerFailure:", "distcomm::Desync:"}) {
    if (error.rfind(type, 0) == 0) return true;
  }
  return false;
}

// Serializes this process's dumps (a failure's, SIGUSR1's or SIGTERM's, the exit's can
// come together from three threads). Never destroyed: dumps happen during exit.
std::timed_mutex& dump_write_mutex() {
  static std::timed_mutex* m = new std::timed_mutex;
  return *m;
}
// How long a dump waits for the one being written before it writes alone (its own temp file
// still lands whole). Short: a failure's dump is written on the thread that ends the op,
// often the stall watch's, which also fails the group's other late ops; and a SIGTERM dump
// has 5 s in all. A dump takes milliseconds; one that takes a second is on a stuck disk.
constexpr std::chrono::seconds kDumpLockWait{1};
// Makes each write's temp name its own: the dumps of one process once shared
// <path>.tmp<pid>, so two at once truncated and wrote over each other's file (a longer
// dump's tail left after a shorter one's end: not JSON), and the second rename found the
// name gone ("cannot write rank_6.json: No such file or directory").
std::atomic<uint64_t> g_dump_writes{0};

// Writes text to path whole, or leaves path as it was and throws Error; never leaves a
// temp file. The text goes first into a file with no name (O_TMPFILE), so that a process
// killed while writing (its launcher's SIGKILL after the grace) leaves nothing; it is
// named (<path>.tmp<pid>.<n>) only once whole, and at once renamed over path. Where the
// folder's file system has no O_TMPFILE, or /proc is missing, a named temp file instead.
void write_whole_file(const std::string& dir, const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(++g_dump_writes);
  int err = 0;
  bool named = false;
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) {
    errno = 0;
    if (!write_fully(fd, text)) {
      err = errno ? errno : EIO;
    } else {
      const std::string self = "/proc/self/fd/" + std::to_string(fd);
      named = ::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) == 0;
    }
    ::close(fd);
  }
  if (!err && !named) {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      err = errno;
      throw Error("trace dump: cannot create " + tmp + ": " + std::strerror(err));
    }
    errno = 0;
    if (!write_fully(fd, text)) err = errno ? errno : EIO;
    ::close(fd);
    named = true;
  }
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    // The error is kept before unlink, which would overwrite errno.
    if (named) ::unlink(tmp.c_str());
    throw Error("trace dump: cannot write " + path + ": " + std::strerror(err));
  }
}

void say_written(const std::string& reason, const std::string& path) {
  log_line("distcomm: trace dump (" + reason + ") written to " + path);
}

void dump_quietly(const std::string& reason) {
  try {
    say_written(reason, write_trace_dump(reason));
  } catch (const std::exception& e) {
    say_if_possible([&] { return std::string("distcomm: trace dump (") + reason + ") failed: " + e.what(); });
  }
}

// The timeline's events so far, to its file (DISTCOMM_TIMELINE), when a launcher asks for a
// dump or stops the rank: a rank ended by its launcher's SIGTERM (and then SIGKILL) never
// reaches the exit flush, and a stopped job's timeline held only the ranks that ended on
// their own (helper-69).
void flush_timeline_quietly(const std::string& reason) {
  if (!timeline_enabled()) return;
  try {
    timeline_flush();
  } catch (const std::exception& e) {
    say_if_possible([&] { return std::string("distcomm: timeline (") + reason + ") not written: " + e.what(); });
  }
}

// An op's bar on the timeline: from start to end, in its group's lane.
void add_to_timeline(const FlightRecorder& recorder, const TraceEntry& entry) {
  const TraceGroupInfo info = recorder.info();
  const OpFingerprint& f = entry.fingerprint;
  const int rank = info.rank < static_cast<int>(info.global_ranks.size()) ? info.global_ranks[info.rank] : info.rank;
  std::string args = "\"seq\":" + std::to_string(f.seq) + ",\"state\":" + json_quote(trace_state_name(entry.state)) +
                     ",\"queued_us\":" + std::to_string((entry.started_ns - entry.queued_ns) / 1000);
  if (f.has_tensor) {
    args += ",\"bytes\":" + std::to_string(f.count * static_cast<int64_t>(element_size(f.dtype))) +
            ",\"dtype\":" + json_quote(dtype_name(f.dtype)) + ",\"count\":" + std::to_string(f.count);
  }
  if (f.p2p) args += ",\"peer\":" + std::to_string(f.root);
  if (!entry.error.empty()) args += ",\"error\":" + json_quote(entry.error);
  timeline_complete(rank, info.name, op_type_name(f.op), entry.started_ns, entry.ended_ns, args);
}

// The ops still queued or running when the rank is stopped, as bars up to now marked
// "unfinished": they are what a stopped (hung) job is about, and would otherwise never reach
// the timeline, which takes an op when it ends (helper-73: a timeline of a job stopped in a
// hang held only the ops that had finished). Only on SIGTERM: after SIGUSR1 the ops go on,
// and each adds its own bar when it ends. (An op that ends between the snapshot and the
// flush has both bars: harmless at the end of a stopped rank.)
void add_unfinished_to_timeline() {
  const int64_t now = timeline_now_ns();
  for (const auto& recorder : recorders()) {
    for (TraceEntry entry : recorder->snapshot()) {
      if (entry.state != TraceEntry::State::kQueued && entry.state != TraceEntry::State::kStarted) continue;
      if (entry.state == TraceEntry::State::kQueued) entry.started_ns = now;  // not started: a bar of no length
      entry.ended_ns = now;
      entry.error = "unfinished when the rank was stopped";
      add_to_timeline(*recorder, entry);
    }
  }
}

// Whether a group is a level of a group by hosts (api/hierarchical_backend.h): its name is
// the group's, then "/hier_host<N>" or "/hier_local<L>" (ProcessGroup::make_levels).
bool is_hier_level(const std::string& name) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos) return false;
  for (const char* prefix : {"hier_host", "hier_local"}) {
    const size_t at = slash + 1 + std::strlen(prefix);
    if (name.compare(slash + 1, std::strlen(prefix), prefix) == 0 && at < name.size() &&
        name.find_first_not_of("0123456789", at) == std::string::npos) {
      return true;
    }
  }
  return false;
}

void on_op_end(const FlightRecorder& recorder, const TraceEntry& entry) {
  if (timeline_enabled()) add_to_timeline(recorder, entry);
  if (entry.state != TraceEntry::State::kFailed || !dumps_on_failure(entry.error)) return;
  if (!dumps_asked_for()) return;
  // A level's failure fails the op of its group that it served, a moment later, whose dump
  // holds the level's records too: dumping here as well printed every rank's "trace dump"
  // line twice, the first naming an op the program never issued ("PeerFailure in
  // all_gather #127", the level's), not the user's op.
  if (is_hier_level(recorder.info().name)) return;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.dumped_on_failure.insert(&recorder).second) return;  // once per group
  }
  const std::string kind = entry.error.substr(std::strlen("distcomm::"), entry.error.find(':', 10) - 10);
  dump_quietly(kind + " in " + op_type_name(entry.fingerprint.op) + " #" + std::to_string(entry.fingerprint.seq));
}

// A launcher's SIGTERM comes with SIGKILL after a grace (tools/launch: --grace_period_s;
// Slurm's KillWait and Kubernetes' terminationGracePeriodSeconds: 30 s by default): a
// dump that takes longer than this is given up, and the process ends anyway.
constexpr std::chrono::seconds kDumpBeforeTermLimit{5};

// SIGTERM or SIGINT: the dump (unless it would repeat the last one word for word:
// tools/launch asks for one with SIGUSR1 just before it stops the ranks), the timeline with
// the ops still running, then the end the signal would have been. Run by the dump thread
// after any SIGUSR1 request before it: the timeline that request appends is whole before
// the process ends (with SIGINT ending the rank at once, a rank still appending after
// tools/launch's SIGUSR1 was sometimes missing from the file).
[[noreturn]] void dump_and_terminate(int sig) {
  const std::string reason = sig == SIGINT ? "SIGINT" : "SIGTERM";
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  const auto started = std::chrono::steady_clock::now();
  // No thread to be had (the process at its limit on threads): no dump, but the end the
  // signal asked for all the same (an exception here would abort the process instead).
  try {
    start_thread("the trace dump after " + reason, [done, started, reason] {
      // The dump first, alone, as before the timeline came: the timeline's flush waits for the
      // other ranks' on its file's lock. It goes only while most of the time is left: a flush
      // the time limit cut short would leave the file without its tail.
      try {
        if (dumps_asked_for() && !same_as_last_dump()) dump_quietly(reason);
        if (std::chrono::steady_clock::now() - started < kDumpBeforeTermLimit / 2) {
          if (timeline_enabled()) add_unfinished_to_timeline();
          flush_timeline_quietly(reason);
        }
      } catch (...) {  // nothing leaves a thread (std::terminate); the signal's end still comes
        say_if_possible(
            [&] { return "distcomm: trace dump (" + reason + ") failed: " + message_of(std::current_exception()); });
      }
      done->set_value();
    }).detach();
  } catch (...) {
    say_if_possible(
        [&] { return "distcomm: no trace dump (" + reason + "): " + message_of(std::current_exception()); });
    done->set_value();
  }
  if (finished.wait_for(kDumpBeforeTermLimit) != std::future_status::ready) {
    log_line("distcomm: trace dump (" + reason + ") still not written after " +
             std::to_string(kDumpBeforeTermLimit.count()) + " s; ending without it");
  }
  // A dump another thread is writing (a failure's, the exit's) lands before the end, in
  // what is left of the time: the lock is then kept, so no new one starts and is cut off.
  const auto left = kDumpBeforeTermLimit - (std::chrono::steady_clock::now() - started);
  if (left > std::chrono::steady_clock::duration::zero()) (void)lock_for(dump_write_mutex(), left);
  terminate_by_signal(sig);
  ::_exit(128 + sig);  // not reached: the signal's default action ends the process
}

void signal_thread(int read_fd) {
  char buf[64];
  while (true) {
    const ssize_t n = ::read(read_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    if (std::memchr(buf, SIGTERM, static_cast<size_t>(n))) dump_and_terminate(SIGTERM);
    if (std::memchr(buf, SIGINT, static_cast<size_t>(n))) dump_and_terminate(SIGINT);
    dump_quietly("SIGUSR1");
    flush_timeline_quietly("SIGUSR1");
  }
}

// Installs on_dump_signal for sig unless the program handles (or ignores) sig itself: its
// handler wins, installed before or after this.
void handle_unless_handled(int sig) {
  struct sigaction old;
  if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_dump_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(sig, &sa, nullptr);
}

void dump_at_exit() {
  // A child forked after the groups were made, with none of its own: its copies are the
  // parent's, whose dump its exit must not replace.
  if (::getpid() != g_signal_pid.load()) return;
  if (!dumps_asked_for()) return;
  dump_quietly("exit");
}

// Once per process (again in a fork child, whose parent's thread did not come along).
// Throws an Error naming the thread and the limits to raise when the dump thread cannot be
// started; then nothing is set up, and the next group's creation tries again.
void set_up_locked(Registry& r) {
  if (r.set_up_in == ::getpid()) return;
  static bool listening = false;  // the end listener and the exit hook: once per process
  if (!listening) {
    FlightRecorder::set_end_listener(on_op_end, /*every_op=*/timeline_enabled());
    std::atexit(dump_at_exit);
    listening = true;
  }
  r.dumped_on_failure.clear();
  int wake_fd[2];
  if (::pipe2(wake_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
    r.set_up_in = ::getpid();  // as before: no dump signals in this process, and no error
    return;
  }
  ::fcntl(wake_fd[0], F_SETFL, 0);  // the thread blocks; the handler's end never does
  try {
    start_thread("the trace dump signal handler (SIGUSR1, SIGTERM)", [fd = wake_fd[0]] {
      try {
        signal_thread(fd);
      } catch (...) {  // nothing leaves a thread (std::terminate): the dumps end, the process goes on
        say_if_possible([&] {
          return "distcomm: the trace dump signal handler stopped: " + message_of(std::current_exception()) +
                 "; SIGUSR1 asks for no more dumps in this process";
        });
      }
    })
        .detach();
  } catch (...) {
    ::close(wake_fd[0]);
    ::close(wake_fd[1]);
    throw;
  }
  r.set_up_in = ::getpid();
  r.wake_fd[0] = wake_fd[0];
  r.wake_fd[1] = wake_fd[1];
  g_signal_write_fd.store(r.wake_fd[1]);
  g_signal_pid.store(::getpid());
  g_terms_received.store(0);
  handle_unless_handled(SIGUSR1);
  // Any launcher's stop (Slurm, mpirun, Kubernetes, tools/launch) is a SIGTERM: with a
  // trace folder asked for, the rank leaves its dump there first; with a timeline, its
  // events. SIGINT too: tools/launch passes a Ctrl-C on to its ranks as SIGINT (as
  // torchrun does), and a stopped job's timeline holds every rank's ops either way.
  if (!r.settings.dump_dir.empty() || timeline_enabled()) {
    handle_unless_handled(SIGTERM);
    handle_unless_handled(SIGINT);
  }
}

}  // namespace

void register_for_dumps(const std::shared_ptr<FlightRecorder>& recorder, const TraceSettings& settings) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.settings = settings;
  set_up_locked(r);
  r.live.erase(std::remove_if(r.live.begin(), r.live.end(), [](const auto& w) { return w.expired(); }), r.live.end());
  r.live.push_back(recorder);
  if (r.settings.dump_dir.empty()) return;
  r.kept.push_back(recorder);
  if (r.kept.size() > kKeptAfterGroup) {
    // The oldest recorder whose group is gone makes room (this registry holds the only reference).
    auto gone = std::find_if(r.kept.begin(), r.kept.end(), [](const auto& p) { return p.use_count() == 1; });
    r.kept.erase(gone != r.kept.end() ? gone : r.kept.begin());
  }
}

std::string trace_dump_json(const std::string& reason) { return dump_text(reason, recorders(), nullptr); }

std::string write_trace_dump(const std::string& reason) {
  // One dump at a time, its text taken under the lock: the last to land is the last built,
  // which holds the most. A dump that cannot have the lock in time (a fork child of a
  // process that was writing; a writer stuck on a slow disk) goes on without it: its own
  // temp file still lands whole.
  std::unique_lock<std::timed_mutex> lock =
      unique_lock_until(dump_write_mutex(), std::chrono::steady_clock::now() + kDumpLockWait);
  const std::string dir = dump_dir();
  // mkdir -p: DISTCOMM_TRACE_DIR given to a rank without a launcher (which makes --trace_dir
  // itself) may be several levels new, and a bare mkdir of the last level lost every dump.
  // A level that cannot be made is named (the open of the file after it said only "No such
  // file or directory" or "Not a directory" of a temp file's name).
  const std::string why = make_folders(dir);
  if (!why.empty()) throw Error("trace dump: " + why);
  const auto recs = recorders();
  const int rank = process_rank(recs);
  const std::string name = rank >= 0 ? "rank_" + std::to_string(rank) : "pid_" + std::to_string(::getpid());
  const std::string path = dir + "/" + name + ".json";
  std::string groups;
  const std::string text = dump_text(reason, recs, &groups);
  write_whole_file(dir, path, text);
  remember_dump(groups);
  return path;
}

}  // namespace distcomm
