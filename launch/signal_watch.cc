#include "launch/signal_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace distcomm {
namespace launch {
namespace {

const int kWatched[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGPIPE};
static_assert(sizeof(kWatched) / sizeof(kWatched[0]) == SignalWatch::kCount, "one saved disposition per signal");
volatile sig_atomic_t g_write_fd = -1;

void on_signal(int sig) {
  int saved = errno;  // the interrupted code may be about to read errno
  unsigned char byte = static_cast<unsigned char>(sig);
  if (g_write_fd >= 0) {
    ssize_t ignored = ::write(g_write_fd, &byte, 1);  // a full pipe already holds a wake-up
    (void)ignored;
  }
  errno = saved;
}

}  // namespace

bool stops_the_job(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT; }

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
    sa.sa_handler = kWatched[i] == SIGPIPE ? SIG_IGN : on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | (kWatched[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
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
  unsigned char buf[64];
  ssize_t n;
  while ((n = ::read(read_fd_, buf, sizeof(buf))) > 0) {
    for (ssize_t i = 0; i < n; ++i) sigs.push_back(buf[i]);
  }
  return sigs;
}

}  // namespace launch
}  // namespace distcomm
