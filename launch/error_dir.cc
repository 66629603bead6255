#include "launch/error_dir.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

namespace distcomm {
namespace launch {
namespace {

// "distcomm-launch-<PID namespace>-": a pid means something only in its namespace, and
// containers may share a /tmp.
std::string prefix() {
  char link[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  std::string ns = n > 0 ? std::string(link, static_cast<size_t>(n)) : "";
  const size_t open = ns.find('['), close = ns.find(']');
  ns = open != std::string::npos && close > open ? ns.substr(open + 1, close - open - 1) : "0";
  return "distcomm-launch-" + ns + "-";
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

// The folder and the files in it (rank error files: no subfolders).
void remove_folder(const std::string& path) {
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") ::unlink((path + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

void remove_stale_folders(const std::string& tmp) {
  DIR* d = ::opendir(tmp.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  const std::string mine = prefix();
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = launcher_of(e->d_name, mine);
    // kill(pid, 0) fails with ESRCH only where no such process exists: a live launcher of
    // another user answers EPERM and keeps its folder.
    if (pid == 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    const std::string path = tmp + "/" + e->d_name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid()) stale.push_back(path);
  }
  ::closedir(d);
  for (const std::string& path : stale) remove_folder(path);
}

}  // namespace

std::string make_error_dir(const std::string& tmp) {
  remove_stale_folders(tmp);
  std::string pattern = tmp + "/" + prefix() + std::to_string(::getpid()) + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

}  // namespace launch
}  // namespace distcomm
