#include "launch/dump_request.h"

#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

namespace distcomm {
namespace launch {
namespace {

// File times come from the kernel's coarse clock, which may lag the precise one by a tick.
constexpr int64_t kFileClockSlackNs = 20'000'000;

int64_t wall_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Whether process pid can act on sig now: it has a handler (the SigCgt mask of
// /proc/<pid>/status, hex, bit sig-1) and is not stopped by job control (State T: the
// handler would not run until it is continued, and the stop that follows continues it with
// SIGTERM pending too). When the file cannot be read (no /proc), says yes: the signal is
// sent as before.
bool handles_signal(pid_t pid, int sig) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  bool stopped = false;
  while (std::getline(status, line)) {
    if (line.rfind("State:", 0) == 0) stopped = line.find(" T ") != std::string::npos || line.find("\tT ") != std::string::npos;
    if (line.rfind("SigCgt:", 0) != 0) continue;
    const unsigned long long caught = std::strtoull(line.c_str() + 7, nullptr, 16);
    return !stopped && ((caught >> (sig - 1)) & 1u);
  }
  return true;
}

}  // namespace

void DumpRequest::ask(const std::string& dir, const std::vector<std::pair<int, pid_t>>& ranks,
                      std::chrono::milliseconds wait) {
  dir_ = dir;
  ranks_.clear();
  missing_.clear();
  not_handling_.clear();
  asked_ns_ = wall_ns();
  deadline_ = Clock::now() + wait;
  for (const auto& [rank, pid] : ranks) {
    if (!handles_signal(pid, SIGUSR1)) {
      not_handling_.push_back(rank);
    } else if (::kill(pid, SIGUSR1) == 0) {
      ranks_.push_back(rank);
    }
  }
  pending_ = !ranks_.empty();
}

void DumpRequest::attempt_began() { began_ns_ = wall_ns(); }

bool DumpRequest::written_since(int rank, int64_t since_ns) const {
  struct stat st;
  const std::string path = dir_ + "/rank_" + std::to_string(rank) + ".json";
  if (::stat(path.c_str(), &st) != 0) return false;
  const int64_t written = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  return written + kFileClockSlackNs >= since_ns;
}

bool DumpRequest::finished(const std::function<bool(int rank)>& running) {
  if (!pending_) return true;
  missing_.clear();
  bool waiting = false;
  for (int rank : ranks_) {
    if (written_since(rank, asked_ns_)) continue;
    // A running rank is awaited for the dump it was asked for. One that exited may have
    // written its own just before the ask (a rank cut off by a peer's failure dumps as it
    // exits): that is this attempt's, and the one to read.
    if (running(rank)) {
      waiting = true;
    } else if (written_since(rank, began_ns_)) {
      continue;
    }
    missing_.push_back(rank);
  }
  if (waiting && Clock::now() < deadline_) return false;
  pending_ = false;
  return true;
}

}  // namespace launch
}  // namespace distcomm
