#include "launch/signal_watch.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace distcomm {
namespace launch {
namespace {

const int kWatched[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGPIPE};
static_assert(sizeof(kWatched) / sizeof(kWatched[0]) == SignalWatch::kCount, "one saved disposition per signal");
const int kStopping[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};  // stops_the_job's, a slot each
constexpr int kStopSlots = sizeof(kStopping) / sizeof(kStopping[0]);

// The handler may run on any thread, and interrupt itself for another signal: what it
// shares with the reader is lock-free atomics, and slots whose fields one handler writes
// before an atomic says they are there.
static_assert(std::atomic<unsigned>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the handler uses no locks");
// The live watch's pipe end, -1 when there is none. An atomic, not a volatile sig_atomic_t:
// the handler reads it on any thread (the store, watch and output threads leave the watched
// signals unblocked), and only an atomic makes that read and the watch's store no data race.
std::atomic<int> g_write_fd{-1};
// Handlers between their first statement and their last: counted before the handler reads
// g_write_fd, so a watch that sets it to -1 and then reads 0 here knows that no handler
// still holds the old descriptor (seq_cst on both sides; ~SignalWatch).
std::atomic<int> g_handlers_running{0};
std::atomic<unsigned> g_caught[SignalWatch::kSignals];  // by signal: how many the handler ran for

// How long ~SignalWatch waits for the handlers still running on other threads before it
// closes the pipe. A handler takes microseconds (a few syscalls); one not done within this
// was stopped midway (a thread stopped by a debugger): the pipe is left open then, never
// closed under it.
constexpr std::chrono::milliseconds kHandlersDrain{1000};

// The first sender of one stopping signal. Its fields are written by the one handler that
// moved `state` from kEmpty, and read only once it is kFilled.
constexpr int kEmpty = 0, kFilling = 1, kFilled = 2;
constexpr int kStatRoom = 512;  // /proc/<pid>/stat is ~300 bytes; field 22 within the first 200
struct FirstSender {
  std::atomic<int> state{kEmpty};
  int32_t pid = 0;
  uint32_t uid = 0;
  int32_t code = 0;
  long long arrival_ns = 0;  // CLOCK_BOOTTIME: /proc/<pid>/stat's start times are counted on it
  char stat[kStatRoom];
  int stat_len = -1;  // -1: not read (gone already, hidden, or no fd left)
};
FirstSender g_first[kStopSlots];

int slot_of(int sig) {
  for (int i = 0; i < kStopSlots; ++i) {
    if (kStopping[i] == sig) return i;
  }
  return -1;
}

// "/proc/<pid>/stat" into `path` with no library call that may lock or allocate.
void stat_path(int pid, char* path) {
  char digits[12];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0 && n < 11);
  const char head[] = "/proc/";
  std::memcpy(path, head, sizeof(head) - 1);
  char* at = path + sizeof(head) - 1;
  while (n > 0) *at++ = digits[--n];
  std::memcpy(at, "/stat", 6);
}

// Async-signal-safe only: atomics, clock_gettime, open, read, close, write and errno. The
// sender's /proc/<pid>/stat is read here, before the handler returns, since a sender such as
// kill(1) or pkill exits at once and its pid may be another's by the time the reader runs;
// only the first of each stopping signal is read (a few syscalls, once per kind).
void on_signal(int sig, siginfo_t* info, void*) {
  g_handlers_running.fetch_add(1);  // first: before g_write_fd is read (~SignalWatch)
  const int saved = errno;  // the interrupted code may be about to read errno
  const int slot = slot_of(sig);
  if (slot >= 0) {
    FirstSender& f = g_first[slot];
    int empty = kEmpty;
    if (f.state.compare_exchange_strong(empty, kFilling)) {
      timespec now{};
      ::clock_gettime(CLOCK_BOOTTIME, &now);
      f.arrival_ns = static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
      f.pid = info != nullptr ? static_cast<int32_t>(info->si_pid) : 0;
      f.uid = info != nullptr ? static_cast<uint32_t>(info->si_uid) : 0u;
      f.code = info != nullptr ? static_cast<int32_t>(info->si_code) : SI_KERNEL;
      f.stat_len = -1;
      if (f.pid > 0) {
        char path[32];
        stat_path(f.pid, path);
        const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
          const ssize_t n = ::read(fd, f.stat, kStatRoom);
          if (n > 0) f.stat_len = static_cast<int>(n);
          ::close(fd);
        }
      }
      f.state.store(kFilled);
    }
  }
  // Counted before its byte is written: a reader that drained the pipe and missed the count
  // finds the byte still to come, and a byte that finds the pipe full leaves one there to
  // wake the reader.
  if (sig > 0 && sig < SignalWatch::kSignals) g_caught[sig].fetch_add(1);
  const int fd = g_write_fd.load();  // read once: the byte goes where the check looked
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(sig);
    ssize_t ignored = ::write(fd, &byte, 1);  // EAGAIN: full, and counted above
    (void)ignored;
  }
  errno = saved;
  g_handlers_running.fetch_sub(1);  // last: the descriptor is no longer used
}

// Whether every handler that may have read the pipe's end has returned, within `wait`.
bool handlers_drained(std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (g_handlers_running.load() != 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    ::sched_yield();
  }
  return true;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The slot of `sig` once filled: a handler on another thread may be mid-way (a few
// syscalls); nullptr if it is not done within a second.
const FirstSender* filled_slot(int sig) {
  const int slot = slot_of(sig);
  if (slot < 0) return nullptr;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    const int state = g_first[slot].state.load();
    if (state == kFilled) return &g_first[slot];
    if (state == kEmpty || std::chrono::steady_clock::now() >= until) return nullptr;
    ::sched_yield();
  }
}

}  // namespace

bool stops_the_job(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT; }

bool from_terminal(const SignalSender& s) { return s.pid == 0 && s.code == SI_KERNEL; }

std::string sender_text(const SignalSender& s) {
  if (from_terminal(s)) return "the kernel (a terminal's Ctrl-C or hangup)";  // a tty's: si_pid 0
  if (s.pid == 0) {
    // kill() from an ancestor PID namespace arrives with si_pid 0 as well (SI_USER).
    return "a process outside this PID namespace (a container runtime: a pod's deletion or eviction, docker stop)";
  }
  const std::string what = s.exited ? "exited, " : s.command.empty() ? "" : s.command + ", ";
  return "pid " + std::to_string(s.pid) + " (" + what + "uid " + std::to_string(s.uid) + ")";
}

std::optional<ProcessStat> parse_process_stat(const std::string& text) {
  // "4711 (slurmstepd) S 1 ...": the command ends at the last ')', since it may hold one.
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcessStat p;
  p.command = text.substr(open + 1, close - open - 1);
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int n = 3; n <= 22; ++n) {  // fields 3 (state) to 22 (starttime)
    if (!(fields >> field)) return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  p.start_ticks = std::strtoull(field.c_str(), &end, 10);
  if (errno != 0 || end == field.c_str() || *end != '\0' || field[0] == '-') return std::nullopt;
  return p;
}

bool could_have_sent(unsigned long long start_ticks, unsigned long long arrival_ticks) {
  return start_ticks <= arrival_ticks;
}

unsigned long long boot_ticks(long long boot_ns) {
  const long tick = ::sysconf(_SC_CLK_TCK);  // USER_HZ: 100 on Linux
  const long long ns_per_tick = 1000000000LL / (tick > 0 ? tick : 100);
  // The kernel's nsec_to_clock_t rounds down too: a start time of the same instant reads the same tick.
  return boot_ns <= 0 ? 0ULL : static_cast<unsigned long long>(boot_ns / ns_per_tick);
}

SignalSender identify_sender(int pid, unsigned uid, int code, unsigned long long arrival_ticks,
                             const std::string& stat_at_arrival) {
  SignalSender s;
  s.pid = pid;
  s.uid = uid;
  s.code = code;
  if (pid <= 0) return s;
  std::optional<ProcessStat> p = parse_process_stat(stat_at_arrival);
  if (!p) p = parse_process_stat(read_all("/proc/" + std::to_string(pid) + "/stat"));
  if (p) {
    if (could_have_sent(p->start_ticks, arrival_ticks)) {
      s.command = p->command;
    } else {
      s.exited = true;  // the pid is another's now: never name that one
    }
    return s;
  }
  // Unreadable: gone, unless kill() finds it (another user's process, /proc mounted hidepid).
  if (::kill(pid, 0) != 0 && errno == ESRCH) s.exited = true;
  return s;
}

SignalWatch::SignalWatch() {
  if (g_write_fd.load() >= 0) throw std::logic_error("SignalWatch: only one may exist at a time");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("SignalWatch: pipe: ") + std::strerror(errno));
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  // A watch before this one left its counts and senders: none of this one's.
  for (std::atomic<unsigned>& c : g_caught) c.store(0);
  for (FirstSender& f : g_first) f.state.store(kEmpty);
  int none = -1;
  if (!g_write_fd.compare_exchange_strong(none, write_fd_)) {
    ::close(read_fd_);
    ::close(write_fd_);
    throw std::logic_error("SignalWatch: only one may exist at a time");
  }
  for (size_t i = 0; i < sizeof(kWatched) / sizeof(kWatched[0]); ++i) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    if (kWatched[i] == SIGPIPE) {
      sa.sa_handler = SIG_IGN;
    } else {
      sa.sa_sigaction = on_signal;  // SA_SIGINFO: who sent it comes with it
    }
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | (kWatched[i] == SIGPIPE ? 0 : SA_SIGINFO) | (kWatched[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
    ::sigaction(kWatched[i], &sa, &previous_[i]);
  }
  // A launcher started from a program that blocked these would never see them.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kWatched) sigaddset(&set, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

SignalWatch::~SignalWatch() {
  for (size_t i = 0; i < sizeof(kWatched) / sizeof(kWatched[0]); ++i) {
    ::sigaction(kWatched[i], &previous_[i], nullptr);
  }
  // No handler reads the pipe's end after this; one on another thread may hold it already
  // (it read it before): closed under it, its byte went into a pipe with no reader left
  // (SIGPIPE, the default action restored above: the launcher ended) or into whatever took
  // the number next (a store's fresh socket). So the pipe is closed only once no handler
  // runs. A handler on this thread cannot be midway here: it would have returned first.
  g_write_fd.store(-1);
  if (!handlers_drained(kHandlersDrain)) return;  // a handler stuck midway: both ends left open
  ::close(read_fd_);
  ::close(write_fd_);
}

std::vector<int> SignalWatch::take() {
  std::vector<int> sigs;
  // Gives `sig` if the handler counted one not given yet: a byte whose count an earlier call
  // gave (its byte came late, or it was a burst's) gives nothing.
  auto give = [&](int sig) {
    if (sig <= 0 || sig >= kSignals) return false;
    const unsigned caught = g_caught[sig].load();
    if (taken_[sig] == caught) return false;
    taken_[sig] = stops_the_job(sig) ? taken_[sig] + 1 : caught;  // a burst of SIGCHLD is one
    sigs.push_back(sig);
    return true;
  };
  unsigned char buf[256];
  ssize_t n;
  while ((n = ::read(read_fd_, buf, sizeof(buf))) > 0) {
    for (ssize_t i = 0; i < n; ++i) give(buf[i]);
  }
  // Those whose bytes found the pipe full (or are still being written): after the others.
  for (int sig : kWatched) {
    while (give(sig)) {
    }
  }
  // Each stopping signal's first sender is identified now, on wake-up, while it likely runs.
  for (int sig : kStopping) {
    if (taken_[sig] > 0 && senders_.count(sig) == 0) (void)sender_of(sig);
  }
  return sigs;
}

std::optional<SignalSender> SignalWatch::sender_of(int sig) const {
  const auto it = senders_.find(sig);
  if (it != senders_.end()) return it->second;
  if (sig <= 0 || sig >= kSignals || taken_[sig] == 0) return std::nullopt;
  const FirstSender* f = filled_slot(sig);
  if (f == nullptr) return std::nullopt;
  const std::string stat = f->stat_len > 0 ? std::string(f->stat, static_cast<size_t>(f->stat_len)) : "";
  return senders_[sig] = identify_sender(f->pid, f->uid, f->code, boot_ticks(f->arrival_ns), stat);
}

std::string SignalWatch::from_text(int sig) const {
  const std::optional<SignalSender> s = sender_of(sig);
  return s ? " from " + sender_text(*s) : "";
}

}  // namespace launch
}  // namespace distcomm
