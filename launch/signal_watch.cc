#include "launch/signal_watch.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

namespace distcomm {
namespace launch {
namespace {

const int kWatched[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGPIPE};
static_assert(sizeof(kWatched) / sizeof(kWatched[0]) == SignalWatch::kCount, "one saved disposition per signal");
volatile sig_atomic_t g_write_fd = -1;

// One caught signal on the pipe: written whole by one write() (atomic below PIPE_BUF), so
// the pipe holds whole records only and a read of whole records' room returns whole ones.
struct Caught {
  int32_t sig;
  int32_t pid;   // si_pid: the sender (0: the kernel, or a process outside this PID namespace)
  uint32_t uid;  // si_uid
  int32_t code;  // si_code: SI_USER (kill), SI_KERNEL (a terminal's), ...
};
static_assert(sizeof(Caught) <= PIPE_BUF, "a record is written atomically");

// Async-signal-safe only: write() and errno. The sender's command is read later, by take().
void on_signal(int sig, siginfo_t* info, void*) {
  int saved = errno;  // the interrupted code may be about to read errno
  Caught c{sig, info != nullptr ? static_cast<int32_t>(info->si_pid) : 0,
           info != nullptr ? static_cast<uint32_t>(info->si_uid) : 0u,
           info != nullptr ? static_cast<int32_t>(info->si_code) : SI_KERNEL};
  if (g_write_fd >= 0) {
    ssize_t ignored = ::write(g_write_fd, &c, sizeof(c));  // a full pipe already holds a wake-up
    (void)ignored;
  }
  errno = saved;
}

std::string command_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
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
  return "pid " + std::to_string(s.pid) + " (" + (s.command.empty() ? "" : s.command + ", ") + "uid " +
         std::to_string(s.uid) + ")";
}

SignalWatch::SignalWatch() {
  if (g_write_fd >= 0) throw std::logic_error("SignalWatch: only one may exist at a time");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("SignalWatch: pipe: ") + std::strerror(errno));
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  g_write_fd = write_fd_;
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
  g_write_fd = -1;
  ::close(read_fd_);
  ::close(write_fd_);
}

std::vector<int> SignalWatch::take() {
  std::vector<int> sigs;
  Caught buf[32];
  ssize_t n;
  while ((n = ::read(read_fd_, buf, sizeof(buf))) > 0) {
    for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof(Caught)); ++i) {
      sigs.push_back(buf[i].sig);
      if (!stops_the_job(buf[i].sig)) continue;  // a SIGCHLD's sender is a rank: nobody asks
      if (senders_.count(buf[i].sig) != 0) continue;  // the first sender stands (repeats forward it)
      SignalSender& s = senders_[buf[i].sig];
      s.pid = buf[i].pid;
      s.uid = buf[i].uid;
      s.code = buf[i].code;
      s.command = s.pid > 0 ? command_of(s.pid) : "";
    }
  }
  return sigs;
}

std::optional<SignalSender> SignalWatch::sender_of(int sig) const {
  const auto it = senders_.find(sig);
  if (it == senders_.end()) return std::nullopt;
  return it->second;
}

std::string SignalWatch::from_text(int sig) const {
  const std::optional<SignalSender> s = sender_of(sig);
  return s ? " from " + sender_text(*s) : "";
}

}  // namespace launch
}  // namespace distcomm
