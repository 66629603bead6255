#include "launch/error_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace distcomm {
namespace launch {
namespace {

// "distcomm-launch-<boot>-<PID namespace>-": a pid means something only on one host's
// boot, in its namespace (hosts may share a TMPDIR over NFS, containers a /tmp; namespace
// numbers repeat across hosts). Empty when either cannot be read: then nothing is swept.
std::string prefix() {
  std::string boot;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
  boot.erase(std::remove(boot.begin(), boot.end(), '-'), boot.end());
  char link[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  std::string ns = n > 0 ? std::string(link, static_cast<size_t>(n)) : "";
  const size_t open = ns.find('['), close = ns.find(']');
  if (boot.size() < 12 || open == std::string::npos || close == std::string::npos || close <= open + 1) return "";
  return "distcomm-launch-" + boot.substr(0, 12) + "-" + ns.substr(open + 1, close - open - 1) + "-";
}

// The launcher pid in "<prefix><pid>-XXXXXX", or 0 for any other name (another PID
// namespace's, or one made before the pid was in the name: nothing tells whether its
// launcher still runs).
pid_t launcher_of(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return 0;
  const std::string rest = name.substr(prefix.size());
  const size_t dash = rest.find('-');
  if (dash == std::string::npos || dash == 0 || rest.size() - dash - 1 != 6) return 0;
  char* end = nullptr;
  const long pid = std::strtol(rest.c_str(), &end, 10);
  if (end != rest.c_str() + dash || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

// The folder `name` in `tmp_fd` and the files in it (rank error files: no subfolders), if
// it is a folder of this user's, opened without following links, so that no swap of the
// name between the look and the removal makes this remove another folder's files.
void remove_folder(int tmp_fd, const std::string& name) {
  const int fd = ::openat(tmp_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_uid != ::getuid()) {
    ::close(fd);
    return;
  }
  DIR* d = ::fdopendir(fd);  // owns fd from here
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  while (dirent* e = ::readdir(d)) {
    const std::string file = e->d_name;
    if (file != "." && file != "..") ::unlinkat(fd, file.c_str(), 0);
  }
  ::closedir(d);
  ::unlinkat(tmp_fd, name.c_str(), AT_REMOVEDIR);
}

void remove_stale_folders(const std::string& tmp, const std::string& mine) {
  const int tmp_fd = ::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (tmp_fd < 0) return;
  const int scan_fd = ::dup(tmp_fd);
  DIR* d = scan_fd < 0 ? nullptr : ::fdopendir(scan_fd);
  if (d == nullptr) {
    if (scan_fd >= 0) ::close(scan_fd);
    ::close(tmp_fd);
    return;
  }
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = launcher_of(e->d_name, mine);
    // kill(pid, 0) fails with ESRCH only where no such process exists: a live launcher of
    // another user answers EPERM and keeps its folder (a reused pid keeps a stale one).
    if (pid == 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    stale.push_back(e->d_name);
  }
  ::closedir(d);
  for (const std::string& name : stale) remove_folder(tmp_fd, name);
  ::close(tmp_fd);
}

}  // namespace

std::string make_error_dir(const std::string& tmp) {
  const std::string mine = prefix();
  if (!mine.empty()) remove_stale_folders(tmp, mine);
  std::string pattern = tmp + "/" + (mine.empty() ? std::string("distcomm-launch-") : mine) + std::to_string(::getpid()) + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

std::string make_error_dir(const std::string& tmp, const std::vector<std::string>& fallbacks, std::string* warning) {
  std::string dir = make_error_dir(tmp);
  if (!dir.empty()) return dir;
  const std::string why = std::strerror(errno);  // before the fallbacks' calls change errno
  std::string tried;
  for (const std::string& place : fallbacks) {
    if (place.empty() || place == tmp) continue;
    dir = make_error_dir(place);
    if (!dir.empty()) break;
    tried += (tried.empty() ? "" : ", ") + place;
  }
  *warning = "cannot make a folder for the ranks' error files in " + tmp + " ($TMPDIR, or /tmp where it is unset): " + why + "; " +
             (!dir.empty() ? "using " + dir + " instead"
                           : (tried.empty() ? std::string() : "nor in " + tried + "; ") +
                                 "the ranks report no error, so the first rank seen to fail is named as the cause");
  return dir;
}

}  // namespace launch
}  // namespace distcomm
