#include "api/diagnostics/peer_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include "api/diagnostics/progress_report.h"
#include "api/group/auto_backend.h"
#include "api/process/fenced_member.h"

namespace distcomm {
namespace {

// The process in `published` (a peer_process_key's value) where its domain is `domain`, else
// pid 0.
PeerProcess same_host_process(const std::string& published, const std::string& domain) {
  PeerProcess p;
  const size_t newline = published.rfind('\n');
  if (domain.empty() || newline == std::string::npos || published.compare(0, newline, domain) != 0) return p;
  char* end = nullptr;
  p.pid = static_cast<int>(std::strtol(published.c_str() + newline + 1, &end, 10));
  if (end && *end == ' ') p.start_ticks = std::strtoull(end + 1, nullptr, 10);
  return p;
}

// process_state_note of `p` (a process of this host), from its /proc/<pid>/stat.
std::string note_of_process(const PeerProcess& p) {
  const int pid = p.pid;
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    // Gone only when the kernel says so: an unreadable /proc (hidepid) is no evidence.
    const bool gone = ::kill(pid, 0) != 0 && errno == ESRCH;
    return gone ? process_state_note(pid, std::nullopt) : "";
  }
  std::string stat(1024, '\0');
  const ssize_t n = ::read(fd, stat.data(), stat.size());
  ::close(fd);
  if (n <= 0) return "";
  stat.resize(static_cast<size_t>(n));
  // Another process under the pid (it started at another time): the rank's has ended, and
  // what this one does says nothing of it (it was said to be stopped, or running).
  if (p.start_ticks != 0) {
    const local::ProcessStat now = local::parse_process_stat(stat);
    if (now.exists && now.start_ticks != p.start_ticks) {
      return "its process " + std::to_string(pid) + " on this host has ended (the pid now belongs to another process)";
    }
  }
  return process_state_note(pid, stat);
}

}  // namespace

std::string peer_process_key(int rank) { return "watch/process/" + std::to_string(rank); }

std::string publish_this_process(Store& board, int rank) {
  std::string domain;
  try {
    domain = process_domain();
  } catch (const std::exception&) {
    return "";
  }
  const local::ProcessStat self = local::read_process_stat(::getpid());
  board.set(peer_process_key(rank),
            domain + "\n" + std::to_string(::getpid()) + " " + std::to_string(self.exists ? self.start_ticks : 0));
  return domain;
}

std::vector<std::string> silent_process_notes(Store& board, const std::vector<bool>& silent, const std::string& domain,
                                              std::map<int, PeerProcess>& pids) {
  std::vector<std::string> notes(silent.size());
  if (domain.empty()) return notes;
  std::vector<int> unread;
  for (size_t r = 0; r < silent.size(); ++r) {
    if (silent[r] && !pids.count(static_cast<int>(r))) unread.push_back(static_cast<int>(r));
  }
  if (!unread.empty()) {
    std::vector<std::string> keys;
    for (const int r : unread) keys.push_back(peer_process_key(r));
    const std::vector<std::optional<Store::Bytes>> values = read_present(board, keys);
    for (size_t i = 0; i < unread.size(); ++i) {
      if (values[i]) pids[unread[i]] = same_host_process(to_string(*values[i]), domain);
    }
  }
  for (size_t r = 0; r < silent.size(); ++r) {
    const auto it = pids.find(static_cast<int>(r));
    if (silent[r] && it != pids.end() && it->second.pid > 0) notes[r] = note_of_process(it->second);
  }
  return notes;
}

}  // namespace distcomm
