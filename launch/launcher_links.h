// Fast news of a launcher that ended: every launcher listens on a port of its own (the
// "alive port" of its Member record) and never accepts; the others connect to it and only
// watch their connection. When a launcher's process ends, for any reason, SIGKILL
// included, its kernel closes the listening socket and resets those connections before its
// ranks are even told (PR_SET_PDEATHSIG comes later in the exit), so the other launchers
// learn it at once, and learn it before their ranks fail because of it -- and the job
// names the machine that went away, not the ranks that lost their peers. A machine that
// crashes whole sends nothing: heartbeats (Liveness) cover that case, in seconds.
#pragma once

#include <poll.h>

#include <string>
#include <vector>

namespace distcomm {
namespace launch {

// This launcher's listening end, for its whole life.
class AlivePort {
 public:
  // Listens on every interface, on a free port. Throws std::runtime_error.
  AlivePort();
  ~AlivePort();
  AlivePort(const AlivePort&) = delete;
  AlivePort& operator=(const AlivePort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Connections to other launchers' alive ports, one per launcher for as long as both live
// (the listener never accepts: connections made anew each round would pile up in its queue).
class LauncherLinks {
 public:
  LauncherLinks() = default;
  ~LauncherLinks();
  LauncherLinks(const LauncherLinks&) = delete;
  LauncherLinks& operator=(const LauncherLinks&) = delete;

  // Looks host up and connects (each within 2 s) to host:port on behalf of id, unless connected already; false
  // when it cannot (then only the heartbeats watch that launcher). Not while ended() runs.
  bool add(const std::string& id, const std::string& host, int port);
  // Those of `among` whose connection has ended, waiting up to timeout_ms for one (0: just
  // look). Safe to call from several threads at once.
  std::vector<std::string> ended(const std::vector<std::string>& among, int timeout_ms) const;

 private:
  std::vector<std::string> ids_;
  std::vector<int> fds_;
};

}  // namespace launch
}  // namespace distcomm
